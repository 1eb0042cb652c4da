// The whole hybrid path on the CPU: a second CPU backend instance with its own memory capacity
// plays the device, holding the hot neurons, while the host CPU computes the cold ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "engine/context.hpp"
#include "engine/offload.hpp"
#include "engine/placement.hpp"
#include "model/model.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {

bool have_vocab() { return test::require_data_file("ggml-vocab-llama-spm.gguf"); }

const std::string& model_path() {
    static const std::string path =
        test::write_tiny_model(test::scratch_dir("hybrid"), "sparse.gguf", test::tiny_model_options(true));
    return path;
}

const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701, 29916, 432, 17204};

std::vector<int32_t> greedy(const model& m, const offload* off, int n_new, std::vector<float>* first_logits = nullptr) {
    context_options co;
    co.n_ctx = 64;
    co.n_threads = 1;
    co.ffn_offload = off;
    context ctx(m, co);
    ctx.decode(batch_view{prompt, {}, {}});
    if (first_logits) first_logits->assign(ctx.logits(-1).begin(), ctx.logits(-1).end());
    std::vector<int32_t> out;
    for (int i = 0; i < n_new; ++i) {
        const auto l = ctx.logits(-1);
        const auto next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        out.push_back(next);
        const int32_t one[1] = {next};
        ctx.decode(batch_view{one, {}, {}});
    }
    return out;
}

// Every `stride`-th neuron of each layer, up to `fraction` of the layer.
std::vector<std::vector<int32_t>> hot_sets(const model& m, double fraction) {
    std::vector<std::vector<int32_t>> hot(static_cast<size_t>(m.hp().n_layer));
    const int32_t n_ff = m.hp().n_ff;
    const auto k = static_cast<int32_t>(fraction * n_ff + 0.5);
    for (auto& h : hot) {
        for (int32_t i = 0; i < n_ff && static_cast<int32_t>(h.size()) < k; i += 2) h.push_back(i);
        for (int32_t i = 1; i < n_ff && static_cast<int32_t>(h.size()) < k; i += 2) h.push_back(i);
        std::sort(h.begin(), h.end());
    }
    return hot;
}

} // namespace

TEST_CASE("hybrid inference gives the CPU-only tokens at 0%, 30%, 70% and 100% of the FFN on the device") {
    if (!have_vocab()) return;
    const auto m = model::load(model_path(), load_options{});
    std::vector<float> cpu_logits;
    const auto expected = greedy(*m, nullptr, 10, &cpu_logits);
    float scale = 0;
    for (float v : cpu_logits) scale = std::max(scale, std::abs(v));
    for (double fraction : {0.0, 0.3, 0.7, 1.0}) {
        CAPTURE(fraction);
        offload off(*m, std::make_unique<device>(device::cpu(1, size_t(64) << 20)), hot_sets(*m, fraction));
        std::vector<float> logits;
        CHECK(greedy(*m, &off, 10, &logits) == expected);
        float diff = 0;
        for (size_t i = 0; i < logits.size(); ++i) diff = std::max(diff, std::abs(logits[i] - cpu_logits[i]));
        CHECK(diff <= 1e-4f * scale);
    }
}

TEST_CASE("the device holds exactly the gathered hot rows within its capacity") {
    if (!have_vocab()) return;
    const auto m = model::load(model_path(), load_options{});
    const auto hot = hot_sets(*m, 0.5);
    offload off(*m, std::make_unique<device>(device::cpu(1, size_t(8) << 20)), hot);
    const auto& w = m->layers()[0];
    const uint64_t rows = hot[0].size();
    CHECK(off.bytes_allocated() >= 2 * rows * (w.up.nb1 + w.gate.nb1 + w.down_t.nb1));
    pib_device_info info{};
    REQUIRE(off.dev().vt().device_info(off.dev().ctx(), &info) == PIB_OK);
    CHECK(info.memory_total - info.memory_free >= off.bytes_allocated());
    CHECK(info.memory_total - info.memory_free <= size_t(8) << 20);
}

TEST_CASE("a device too small for the hot rows is an out-of-memory error, not a crash") {
    if (!have_vocab()) return;
    const auto m = model::load(model_path(), load_options{});
    try {
        offload off(*m, std::make_unique<device>(device::cpu(1, 4096)), hot_sets(*m, 1.0));
        FAIL("expected out_of_memory");
    } catch (const error& e) {
        CHECK(e.code() == status::out_of_memory);
    }
}

TEST_CASE("bad hot sets are rejected") {
    if (!have_vocab()) return;
    const auto m = model::load(model_path(), load_options{});
    auto hot = hot_sets(*m, 0.1);
    hot[0].push_back(100000);
    CHECK_THROWS_AS(offload(*m, std::make_unique<device>(device::cpu(1)), hot), error);
    hot = hot_sets(*m, 0.1);
    std::reverse(hot[1].begin(), hot[1].end());
    CHECK_THROWS_AS(offload(*m, std::make_unique<device>(device::cpu(1)), hot), error);
    hot.pop_back();
    CHECK_THROWS_AS(offload(*m, std::make_unique<device>(device::cpu(1)), hot), error);
}

TEST_CASE("the planner's budget holds for everything the device allocates, at several budgets") {
    if (!have_vocab()) return;
    const auto m = model::load(model_path(), load_options{});
    const hparams& h = m->hp();
    const uint64_t neuron = m->layers()[0].up.nb1 + m->layers()[0].gate.nb1 + m->layers()[0].down_t.nb1;
    const uint64_t ffn_all = neuron * static_cast<uint64_t>(h.n_ff) * static_cast<uint64_t>(h.n_layer);
    const uint64_t scratch = context::device_scratch_bytes(h, max_offload_batch, h.n_ff);
    const auto expected = greedy(*m, nullptr, 6);
    for (double fraction : {0.3, 0.7, 1.0}) {
        CAPTURE(fraction);
        const uint64_t budget = scratch + static_cast<uint64_t>(fraction * static_cast<double>(ffn_all)) + 4096;
        auto dev = std::make_unique<device>(device::cpu(1, size_t(1) << 30));
        device* raw = dev.get();
        offload_request r;
        r.model_path = test::scratch_dir("hybrid_budget") + "/model.gguf"; // GPU index goes here
        r.budget = static_cast<int64_t>(budget);
        r.reset_gpu_index = true;
        offload_result placed = place_ffn(*m, std::move(dev), r);
        REQUIRE(placed.ffn);
        CHECK(placed.plan.bytes_total <= budget);
        uint64_t hot = 0;
        for (const auto& l : placed.plan.hot) hot += l.size();
        CHECK(hot > 0);
        if (fraction == 1.0) CHECK(hot == static_cast<uint64_t>(h.n_ff * h.n_layer));
        context_options co;
        co.n_ctx = 64;
        co.n_threads = 1;
        co.ffn_offload = placed.ffn.get();
        {
            context ctx(*m, co);
            pib_device_info info{};
            REQUIRE(raw->vt().device_info(raw->ctx(), &info) == PIB_OK);
            CHECK(info.memory_total - info.memory_free <= budget);
        }
        CHECK(greedy(*m, placed.ffn.get(), 6) == expected);
    }
}

TEST_CASE("a cached GPU index is reused for the same model and budget and ignored after a reset") {
    if (!have_vocab()) return;
    const auto m = model::load(model_path(), load_options{});
    offload_request r;
    r.model_path = test::scratch_dir("hybrid_cache") + "/model.gguf";
    r.budget = int64_t(16) << 20;
    r.reset_gpu_index = true;
    const auto first = place_ffn(*m, std::make_unique<device>(device::cpu(1)), r);
    CHECK(first.source.find("calibration") != std::string::npos);
    r.reset_gpu_index = false;
    const auto second = place_ffn(*m, std::make_unique<device>(device::cpu(1)), r);
    CHECK(second.source.find("GPU index") != std::string::npos);
    CHECK(second.plan.hot == first.plan.hot);
    r.budget = int64_t(12) << 20; // another budget: the cache is stale
    const auto third = place_ffn(*m, std::make_unique<device>(device::cpu(1)), r);
    CHECK(third.source.find("GPU index") == std::string::npos);
}
