// The KV cache room: which cells a batch claims, what attention spans, and that the cell
// positions attention reads in backend memory follow every change.
#include <doctest/doctest.h>

#include <vector>

#include "engine/kv_cache.hpp"

using namespace pi;

namespace {

hparams small_hparams() {
    hparams h;
    h.n_layer = 3;
    h.n_embd = 32;
    h.n_head = 4;
    h.n_head_kv = 2;
    h.head_dim = 8;
    return h;
}

// The cell positions as the host backend holds them for attention.
std::vector<int32_t> published(device& cpu, const kv_cache& kv) {
    const pib_tensor t = kv.host_positions();
    void* base = cpu.vt().buffer_host_ptr(cpu.ctx(), t.buffer);
    REQUIRE(base != nullptr);
    const auto* p = reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(base) + t.offset);
    return std::vector<int32_t>(p, p + kv.n_ctx());
}

} // namespace

TEST_CASE("an empty cache spans no cells and publishes every cell as empty") {
    device cpu = device::cpu(1);
    const kv_cache kv(cpu, nullptr, small_hparams(), 8, true);
    CHECK(kv.n_ctx() == 8);
    CHECK(kv.span() == 0);
    CHECK_FALSE(kv.any_on_device());
    CHECK(published(cpu, kv) == std::vector<int32_t>(8, -1));
}

TEST_CASE("occupied cells extend the span to the last one and are published") {
    device cpu = device::cpu(1);
    kv_cache kv(cpu, nullptr, small_hparams(), 8, true);
    const std::vector<int32_t> batch = {0, 1, 2};
    kv.occupy(batch);
    CHECK(kv.span() == 3);
    CHECK(kv.host_positions().ne0 == 3);
    const std::vector<int32_t> later = {5};
    kv.occupy(later);
    CHECK(kv.span() == 6);
    CHECK(published(cpu, kv) == std::vector<int32_t>{0, 1, 2, -1, -1, 5, -1, -1});
}

TEST_CASE("forgetting a failed batch and truncating empty their cells") {
    device cpu = device::cpu(1);
    kv_cache kv(cpu, nullptr, small_hparams(), 8, false);
    const std::vector<int32_t> prompt = {0, 1, 2, 3};
    kv.occupy(prompt);
    const std::vector<int32_t> failed = {4, 5};
    kv.occupy(failed);
    kv.forget(failed);
    CHECK(kv.span() == 4);
    kv.truncate(2);
    CHECK(kv.span() == 2);
    CHECK(published(cpu, kv) == std::vector<int32_t>{0, 1, -1, -1, -1, -1, -1, -1});
    kv.truncate(0);
    CHECK(kv.span() == 0);
}

TEST_CASE("every layer has K and V cells of its own, F16 or F32 as asked") {
    device cpu = device::cpu(1);
    const hparams h = small_hparams();
    for (const bool f16 : {true, false}) {
        kv_cache kv(cpu, nullptr, h, 16, f16);
        const ggml_type type = f16 ? ggml_type::f16 : ggml_type::f32;
        for (size_t il = 0; il < 3; ++il) {
            const kv_cache::layer_cells& cells = kv.layer(il);
            CHECK(cells.k.type == static_cast<uint32_t>(type));
            CHECK(cells.k.ne0 == h.n_embd_kv());
            CHECK(cells.k.ne1 == 16);
            CHECK(cells.v.offset != cells.k.offset);
            CHECK_FALSE(kv.on_device(il));
            if (il > 0) CHECK(cells.k.offset != kv.layer(il - 1).k.offset);
        }
        const std::vector<int32_t> one = {0};
        kv.occupy(one);
        CHECK(kv.bytes_read_per_layer() == 2 * row_bytes(type, h.n_embd_kv()));
    }
}

TEST_CASE("a device layer's cache costs its F16 cells and their positions") {
    const hparams h = small_hparams();
    CHECK(kv_cache::device_layer_bytes(h, 256) >=
          2 * row_bytes(ggml_type::f16, h.n_embd_kv()) * 256 + 256 * sizeof(int32_t));
}
