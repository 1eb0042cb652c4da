// The KV cache room: which cells a batch claims, what attention spans, and that each sequence's
// view of the cells in backend memory follows every change.
#include <doctest/doctest.h>

#include <vector>

#include "engine/kv_cache.hpp"
#include "support/error.hpp"

using namespace pi;

namespace {

hparams small_hparams() {
    hparams h;
    h.n_layer = 3;
    h.n_embd = 32;
    h.n_head = 4;
    h.n_head_kv = 2;
    h.head_dim = 8;
    h.n_vocab = 100;
    return h;
}

// Sequence seq's view of the cells as the host backend holds it for attention.
std::vector<int32_t> published(device& cpu, const kv_cache& kv, int32_t seq = 0) {
    pib_tensor t = kv.host_positions(seq);
    void* base = cpu.vt().buffer_host_ptr(cpu.ctx(), t.buffer);
    REQUIRE(base != nullptr);
    const auto* p = reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(base) + t.offset);
    return std::vector<int32_t>(p, p + kv.n_ctx());
}

std::vector<int32_t> place(kv_cache& kv, const std::vector<int32_t>& positions, int32_t seq = 0) {
    const std::vector<int32_t> seqs(positions.size(), seq), tokens(positions.size(), 7);
    std::vector<int32_t> cells(positions.size());
    kv.place(seqs, positions, tokens, cells);
    return cells;
}

} // namespace

TEST_CASE("an empty cache spans no cells and publishes every cell as empty") {
    device cpu = device::cpu(1);
    const kv_cache kv(cpu, nullptr, small_hparams(), 8, 2, true);
    CHECK(kv.n_ctx() == 8);
    CHECK(kv.n_seq() == 2);
    CHECK(kv.span() == 0);
    CHECK_FALSE(kv.any_on_device());
    CHECK(published(cpu, kv, 0) == std::vector<int32_t>(8, -1));
    CHECK(published(cpu, kv, 1) == std::vector<int32_t>(8, -1));
}

TEST_CASE("a batch claims the lowest free cells and extends the span to the last one") {
    device cpu = device::cpu(1);
    kv_cache kv(cpu, nullptr, small_hparams(), 8, 1, true);
    CHECK(place(kv, {0, 1, 2}) == std::vector<int32_t>{0, 1, 2});
    CHECK(kv.span() == 3);
    CHECK(kv.host_positions(0).ne0 == 3);
    CHECK(place(kv, {5}) == std::vector<int32_t>{3});
    CHECK(published(cpu, kv) == std::vector<int32_t>{0, 1, 2, 5, -1, -1, -1, -1});
    // A position the sequence already holds alone is stored in its cell again.
    CHECK(place(kv, {1}) == std::vector<int32_t>{1});
    CHECK(kv.used_cells() == 4);
}

TEST_CASE("each sequence sees only its own cells") {
    device cpu = device::cpu(1);
    kv_cache kv(cpu, nullptr, small_hparams(), 8, 2, false);
    place(kv, {0, 1}, 0);
    place(kv, {0, 1, 2}, 1);
    CHECK(published(cpu, kv, 0) == std::vector<int32_t>{0, 1, -1, -1, -1, -1, -1, -1});
    CHECK(published(cpu, kv, 1) == std::vector<int32_t>{-1, -1, 0, 1, 2, -1, -1, -1});
    kv.copy(0, 1, 0, 1);
    CHECK(published(cpu, kv, 1) == std::vector<int32_t>{0, -1, -1, 1, 2, -1, -1, -1});
    CHECK(kv.used_cells() == 4);
}

TEST_CASE("forgetting a failed batch and removing positions empty their cells") {
    device cpu = device::cpu(1);
    kv_cache kv(cpu, nullptr, small_hparams(), 8, 1, false);
    place(kv, {0, 1, 2, 3});
    const std::vector<int32_t> failed = place(kv, {4, 5});
    kv.forget(failed);
    CHECK(kv.span() == 4);
    kv.remove(0, 2, -1);
    CHECK(kv.span() == 2);
    CHECK(published(cpu, kv) == std::vector<int32_t>{0, 1, -1, -1, -1, -1, -1, -1});
    kv.remove(-1, 0, -1);
    CHECK(kv.span() == 0);
    CHECK(kv.pos_max(0) == -1);
}

TEST_CASE("a batch for which too few cells are free changes nothing") {
    device cpu = device::cpu(1);
    kv_cache kv(cpu, nullptr, small_hparams(), 4, 2, true);
    place(kv, {0, 1, 2}, 0);
    try {
        place(kv, {0, 1}, 1);
        FAIL("expected context_full");
    } catch (const error& e) {
        CHECK(e.code() == status::context_full);
    }
    CHECK(kv.used_cells() == 3);
    CHECK(kv.pos_max(1) == -1);
}

TEST_CASE("a cache with 0 or more than 64 sequences is refused") {
    device cpu = device::cpu(1);
    CHECK_THROWS_AS(kv_cache(cpu, nullptr, small_hparams(), 4, 0, true), error);
    CHECK_THROWS_AS(kv_cache(cpu, nullptr, small_hparams(), 4, 65, true), error);
}
