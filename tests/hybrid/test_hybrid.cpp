// The whole hybrid path on the CPU: a second CPU backend instance with its own memory capacity
// plays the device, holding dense blocks and hot neurons, while the host CPU computes the rest.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "engine/context.hpp"
#include "engine/offload.hpp"
#include "engine/placement.hpp"
#include "engine/row_prefix_copies.hpp"
#include "model/model.hpp"
#include "support/byte_stream.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

#include "hybrid_runs.hpp"

using namespace pi;

namespace {

const std::string& model_path() {
    static const std::string path = test::write_tiny_model(
        test::scratch_dir("hybrid"), "sparse.gguf", test::tiny_model_options(true));
    return path;
}

const std::vector<int32_t>& prompt = test::hybrid_prompt;

std::vector<int32_t> greedy(const model& m, const offload* off, int n_new,
                            std::vector<float>* first_logits = nullptr) {
    std::vector<int32_t> tokens;
    const auto steps = test::decode_run(m, off, tokens, n_new);
    if (first_logits && !steps.empty()) *first_logits = steps.front();
    return tokens;
}

// Every `stride`-th neuron of each layer, up to `fraction` of the layer.
std::vector<std::vector<int32_t>> hot_sets(const model& m, double fraction) {
    std::vector<std::vector<int32_t>> hot(static_cast<size_t>(m.hp().n_layer));
    const int32_t n_ff = m.hp().n_ff;
    const auto k = static_cast<int32_t>(fraction * n_ff + 0.5);
    for (auto& h : hot) {
        for (int32_t i = 0; i < n_ff && static_cast<int32_t>(h.size()) < k; i += 2)
            h.push_back(i);
        for (int32_t i = 1; i < n_ff && static_cast<int32_t>(h.size()) < k; i += 2)
            h.push_back(i);
        std::sort(h.begin(), h.end());
    }
    return hot;
}

// Hot neurons only: the dense blocks stay on the CPU.
offload_placement ffn_only(const model& m, double fraction) {
    offload_placement p;
    p.hot = hot_sets(m, fraction);
    return p;
}

// Hot neurons plus every dense block; kv_n_ctx > 0 also puts the KV cache on the device.
offload_placement with_dense(const model& m, double fraction, int32_t kv_n_ctx) {
    offload_placement p = ffn_only(m, fraction);
    const auto n = static_cast<size_t>(m.hp().n_layer);
    p.attn.assign(n, true);
    p.predictor.assign(n, true);
    p.ffn_norm.assign(n, true);
    p.output = true;
    p.kv_n_ctx = kv_n_ctx;
    return p;
}

std::unique_ptr<device> cpu_device(size_t capacity = size_t(64) << 20) {
    return std::make_unique<device>(device::cpu(1, capacity));
}

float max_abs(const std::vector<float>& v) {
    float m = 0;
    for (float x : v)
        m = std::max(m, std::abs(x));
    return m;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float d = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

} // namespace

TEST_CASE("hybrid inference gives the CPU-only tokens at 0%, 30%, 70% and 100% of the FFN on the "
          "device") {
    const auto m = model::load(model_path(), load_options{});
    std::vector<float> cpu_logits;
    const auto expected = greedy(*m, nullptr, 10, &cpu_logits);
    for (double fraction : {0.0, 0.3, 0.7, 1.0}) {
        CAPTURE(fraction);
        offload off(*m, cpu_device(), ffn_only(*m, fraction));
        std::vector<float> logits;
        CHECK(greedy(*m, &off, 10, &logits) == expected);
        CHECK(max_diff(logits, cpu_logits) <= 1e-4f * max_abs(cpu_logits));
    }
}

TEST_CASE("dense blocks on the device give the CPU-only tokens, with the KV cache on either side") {
    const auto m = model::load(model_path(), load_options{});
    std::vector<float> cpu_logits;
    const auto expected = greedy(*m, nullptr, 10, &cpu_logits);
    for (int32_t kv_n_ctx : {0, 64}) {
        for (double fraction : {0.0, 0.3, 0.7, 1.0}) {
            CAPTURE(kv_n_ctx);
            CAPTURE(fraction);
            offload off(*m, cpu_device(), with_dense(*m, fraction, kv_n_ctx));
            CHECK(off.any_dense());
            std::vector<float> logits;
            CHECK(greedy(*m, &off, 10, &logits) == expected);
            CHECK(max_diff(logits, cpu_logits) <= 1e-4f * max_abs(cpu_logits));
        }
    }
}

TEST_CASE("a mixed placement (some layers' blocks on the device, output on the CPU) gives the "
          "CPU-only tokens") {
    const auto m = model::load(model_path(), load_options{});
    const auto expected = greedy(*m, nullptr, 8);
    offload_placement p = with_dense(*m, 0.5, 64);
    for (size_t il = 0; il < p.attn.size(); ++il) {
        p.attn[il] = il % 2 == 0;
        p.predictor[il] = il % 3 != 0;
        p.ffn_norm[il] = il % 2 == 1;
    }
    p.output = false;
    p.hot.back() = hot_sets(*m, 1.0).back();
    offload off(*m, cpu_device(), p);
    CHECK(greedy(*m, &off, 8) == expected);
}

TEST_CASE("a context larger than the reserved KV cache keeps its KV cache on the host") {
    const auto m = model::load(model_path(), load_options{});
    offload off(*m, cpu_device(), with_dense(*m, 0.5, 32));
    context_options co;
    co.n_ctx = 64;
    co.offloaded = &off;
    CHECK_FALSE(context(*m, co).kv_on_device());
    co.n_ctx = 32;
    CHECK(context(*m, co).kv_on_device());
    co.kv_f16 = false; // the reservation is for F16 cells
    CHECK_FALSE(context(*m, co).kv_on_device());
}

TEST_CASE("decoding with an offload device can be cancelled between layers and then resumed") {
    const auto m = model::load(model_path(), load_options{});
    offload off(*m, cpu_device(), with_dense(*m, 0.5, 64));
    context_options co;
    co.n_ctx = 64;
    co.offloaded = &off;
    context ctx(*m, co);
    ctx.cancel();
    try {
        ctx.decode(batch_view{prompt, {}, {}});
        FAIL("expected cancelled");
    } catch (const error& e) {
        CHECK(e.code() == status::cancelled);
    }
    CHECK(ctx.n_past() == 0);
    ctx.clear_cancel();
    ctx.decode(batch_view{prompt, {}, {}});
    CHECK(ctx.n_past() == static_cast<int32_t>(prompt.size()));
}

TEST_CASE("the device holds exactly the gathered hot rows within its capacity") {
    const auto m = model::load(model_path(), load_options{});
    const auto hot = hot_sets(*m, 0.5);
    offload off(*m, cpu_device(size_t(8) << 20), ffn_only(*m, 0.5));
    const auto& w = m->layers()[0];
    const uint64_t rows = hot[0].size();
    CHECK(off.bytes_allocated() >= 2 * rows * (w.up.nb1 + w.gate.nb1 + w.down_t.nb1));
    pib_device_info info{};
    REQUIRE(off.dev().vt().device_info(off.dev().ctx(), &info) == PIB_OK);
    CHECK(info.memory_total - info.memory_free >= off.bytes_allocated());
    CHECK(info.memory_total - info.memory_free <= size_t(8) << 20);
}

TEST_CASE("a device too small for the hot rows is an out-of-memory error, not a crash") {
    const auto m = model::load(model_path(), load_options{});
    try {
        offload off(*m, cpu_device(4096), ffn_only(*m, 1.0));
        FAIL("expected out_of_memory");
    } catch (const error& e) {
        CHECK(e.code() == status::out_of_memory);
    }
}

TEST_CASE("bad hot sets are rejected") {
    const auto m = model::load(model_path(), load_options{});
    auto p = ffn_only(*m, 0.1);
    p.hot[0].push_back(100000);
    CHECK_THROWS_AS(offload(*m, cpu_device(), p), error);
    p = ffn_only(*m, 0.1);
    std::reverse(p.hot[1].begin(), p.hot[1].end());
    CHECK_THROWS_AS(offload(*m, cpu_device(), p), error);
    p.hot.pop_back();
    CHECK_THROWS_AS(offload(*m, cpu_device(), p), error);
    p = with_dense(*m, 0.1, 0);
    p.attn.pop_back();
    CHECK_THROWS_AS(offload(*m, cpu_device(), p), error);
    p = with_dense(*m, 0.1, -1);
    CHECK_THROWS_AS(offload(*m, cpu_device(), p), error);
}

TEST_CASE("the planner's budget holds for everything the device allocates, at several budgets") {
    const auto m = model::load(model_path(), load_options{});
    const hparams& h = m->hp();
    constexpr int32_t n_ctx = 64;
    const planner::plan_input in = plan_input_for(*m, 0, max_offload_batch, n_ctx, ~uint64_t{0});
    uint64_t dense = in.output_bytes;
    for (const auto& l : in.layers)
        dense += l.attn_bytes + l.predictor_bytes + l.ffn_norm_bytes;
    const uint64_t neuron = in.layers[0].neuron_bytes;
    const uint64_t ffn_all =
        neuron * static_cast<uint64_t>(h.n_ff) * static_cast<uint64_t>(h.n_layer);
    const uint64_t fixed =
        in.scratch_bytes + dense + in.kv_bytes_per_layer * static_cast<uint64_t>(h.n_layer);
    const auto expected = greedy(*m, nullptr, 6);
    // A budget short of the whole dense part, then 30%, 70% and 100% of the FFN on top of it.
    for (double fraction : {-0.5, 0.3, 0.7, 1.0}) {
        CAPTURE(fraction);
        const uint64_t budget =
            fraction < 0
                ? in.scratch_bytes + in.layers[0].attn_bytes + 4096
                : fixed + static_cast<uint64_t>(fraction * static_cast<double>(ffn_all)) +
                      static_cast<uint64_t>(h.n_layer) *
                          (2 * device_tensor_alignment + 4 * static_cast<uint64_t>(h.n_ff));
        auto dev = std::make_unique<device>(device::cpu(1, size_t(1) << 30));
        device* raw = dev.get();
        offload_request r;
        r.model_path = test::scratch_dir("hybrid_budget") + "/model.gguf"; // GPU index goes here
        r.budget = static_cast<int64_t>(budget);
        r.reset_gpu_index = true;
        r.kv_n_ctx = n_ctx;
        offload_result placed = place_on_device(*m, std::move(dev), r);
        REQUIRE(placed.placed);
        CHECK(placed.plan.bytes_total <= budget);
        uint64_t hot = 0;
        for (const auto& l : placed.plan.hot)
            hot += l.size();
        CHECK(placed.plan.attn_on_device[0]);
        if (fraction < 0) {
            CHECK(hot == 0);
            CHECK_FALSE(placed.plan.output_on_device);
        } else {
            CHECK(hot > 0);
            CHECK(placed.plan.output_on_device);
            CHECK(placed.plan.kv_on_device);
        }
        if (fraction == 1.0) CHECK(hot == static_cast<uint64_t>(h.n_ff * h.n_layer));
        context_options co;
        co.n_ctx = n_ctx;
        co.n_threads = 1;
        co.offloaded = placed.placed.get();
        {
            context ctx(*m, co);
            CHECK(ctx.kv_on_device() == (fraction >= 0));
            pib_device_info info{};
            REQUIRE(raw->vt().device_info(raw->ctx(), &info) == PIB_OK);
            CHECK(info.memory_total - info.memory_free <= budget);
        }
        CHECK(greedy(*m, placed.placed.get(), 6) == expected);
    }
}

TEST_CASE("a cached GPU index is reused for the same model and budget and ignored after a reset") {
    const auto m = model::load(model_path(), load_options{});
    offload_request r;
    r.model_path = test::scratch_dir("hybrid_cache") + "/model.gguf";
    r.budget = int64_t(16) << 20;
    r.reset_gpu_index = true;
    const auto first = place_on_device(*m, std::make_unique<device>(device::cpu(1)), r);
    CHECK(first.source.find("calibration") != std::string::npos);
    r.reset_gpu_index = false;
    const auto second = place_on_device(*m, std::make_unique<device>(device::cpu(1)), r);
    CHECK(second.source.find("GPU index") != std::string::npos);
    CHECK(second.plan.hot == first.plan.hot);
    r.budget = int64_t(12) << 20; // another budget: the cache is stale
    const auto third = place_on_device(*m, std::make_unique<device>(device::cpu(1)), r);
    CHECK(third.source.find("GPU index") == std::string::npos);
}

TEST_CASE("sequences, a shift and saved state work with the KV cache on the device") {
    const auto m = model::load(model_path(), load_options{});
    const std::vector<int32_t> other = {1, 395, 740, 1064};
    const auto last_logits_alone = [&](const std::vector<int32_t>& tokens) {
        context ctx(*m, context_options{});
        ctx.decode(batch_view{tokens, {}, {}});
        const auto l = ctx.logits(-1);
        return std::vector<float>(l.begin(), l.end());
    };
    for (int32_t kv_n_ctx : {0, 64}) {
        CAPTURE(kv_n_ctx);
        offload off(*m, cpu_device(), with_dense(*m, 0.5, kv_n_ctx));
        context_options co;
        co.n_ctx = 64;
        co.n_seq_max = 2;
        co.offloaded = &off;
        context ctx(*m, co);
        CHECK(ctx.kv_on_device() == (kv_n_ctx > 0));
        std::vector<int32_t> tokens = prompt, seqs(prompt.size(), 0);
        tokens.insert(tokens.end(), other.begin(), other.end());
        seqs.insert(seqs.end(), other.size(), 1);
        batch_view b;
        b.tokens = tokens;
        b.seqs = seqs;
        b.last_of_each_sequence = true;
        ctx.decode(b);
        const auto l0 = ctx.logits(static_cast<int32_t>(prompt.size()) - 1);
        const auto l1 = ctx.logits(static_cast<int32_t>(tokens.size()) - 1);
        const std::vector<float> want0 = last_logits_alone(prompt),
                                 want1 = last_logits_alone(other);
        CHECK(max_diff(std::vector<float>(l0.begin(), l0.end()), want0) <= 1e-4f * max_abs(want0));
        CHECK(max_diff(std::vector<float>(l1.begin(), l1.end()), want1) <= 1e-4f * max_abs(want1));

        // Shifting sequence 1 by +3 and decoding at +3 matches a run decoded there directly.
        ctx.cache().shift(1, 0, -1, 3);
        const int32_t next[1] = {261}, at[1] = {static_cast<int32_t>(other.size()) + 3},
                      seq1[1] = {1};
        batch_view step;
        step.tokens = next;
        step.pos = at;
        step.seqs = seq1;
        ctx.decode(step);
        context direct(*m, context_options{});
        std::vector<int32_t> pos(other.size());
        std::iota(pos.begin(), pos.end(), 3);
        direct.decode(batch_view{other, pos, {}});
        direct.decode(batch_view{next, at, {}});
        const auto a = ctx.logits(-1), d = direct.logits(-1);
        const std::vector<float> dv(d.begin(), d.end());
        CHECK(max_diff(std::vector<float>(a.begin(), a.end()), dv) <= 1e-3f * max_abs(dv));

        // The state comes back bit for bit into a context of the same placement.
        std::vector<uint8_t> blob;
        byte_writer out(blob);
        ctx.save_state(-1, out);
        context restored(*m, co);
        byte_reader in(blob, "state");
        restored.load_state(-1, in);
        const int32_t more[1] = {395};
        ctx.decode(batch_view{more, {}, {}});
        restored.decode(batch_view{more, {}, {}});
        const auto x = ctx.logits(-1), y = restored.logits(-1);
        CHECK(std::equal(x.begin(), x.end(), y.begin(), y.end()));
    }
}

TEST_CASE("offloading a falcon or opt model is refused as unsupported, naming the architecture") {
    for (const std::string arch : {"falcon", "opt"}) {
        synth_options o = test::tiny_model_options(true);
        o.arch = arch;
        const std::string path =
            test::write_tiny_model(test::scratch_dir("hybrid_arch"), arch + ".gguf", o);
        const auto m = model::load(path, load_options{});
        try {
            offload off(*m, cpu_device(), ffn_only(*m, 0.5));
            FAIL("expected unsupported");
        } catch (const error& e) {
            CHECK(e.code() == status::unsupported);
            CHECK(std::string(e.what()).find(arch) != std::string::npos);
        }
    }
}

// Per decoded token (docs/hybrid.md), with x = n_embd floats and L layers: the embedded x
// goes up, the batch's position, cell and output row (4 bytes each) go up in one copy and the
// KV view's changed cell (4 bytes) in another, the
// logits and one download of every device-predicted layer's list lengths come back. A layer
// wholly on the device adds nothing; a hybrid layer predicted on the device adds its cold lists
// and x coming to the host and the CPU's sum going back; one predicted on the host sends xn
// and its hot device rows and gets the device's partial sum back.
// A prompt's layer sends its tokens' cold lists together: runs of rows merged across their
// unused tails (row_prefix_copies.hpp), one copy here, where a row is n_ff ids.
TEST_CASE("a prompt's cold lists come to the host in one copy per layer") {
    const auto m = model::load(model_path(), load_options{});
    const hparams& h = m->hp();
    REQUIRE(4 * static_cast<size_t>(h.n_ff) * test::hybrid_prompt.size() <= row_prefix_max_gap);
    const auto layers = static_cast<uint64_t>(h.n_layer);
    offload off(*m, cpu_device(), with_dense(*m, 0.5, 64));
    const run_stats s = test::prompt_stats(*m, &off);
    const std::string line = std::to_string(test::hybrid_prompt.size()) +
                             "-token prompt: " + std::to_string(s.link.to_host) +
                             " B to the host in " + std::to_string(s.link.downloads) + " copies";
    MESSAGE(line);
    // Per layer the lengths, the lists and x; the logits and the layers' lengths once. Token by
    // token it was up to 2 + (2 + 8) per layer.
    CHECK(s.link.downloads <= 2 + 3 * layers);
    CHECK(s.link.downloads > 2 + layers); // some layer has cold neurons to send
    std::vector<int32_t> tokens;
    const auto cpu = test::decode_run(*m, nullptr, tokens, 1);
    const auto hybrid = test::decode_run(*m, &off, tokens, 1);
    const std::vector<float>& want = cpu[0];
    CHECK(max_diff(hybrid[0], want) <= 1e-3f * max_abs(want));
}

TEST_CASE("what crosses between the host and the device per decoded token") {
    const auto m = model::load(model_path(), load_options{});
    const hparams& h = m->hp();
    constexpr uint64_t n_new = 4, i32 = 4;
    const uint64_t x_bytes = 4 * static_cast<uint64_t>(h.n_embd),
                   logits = 4 * static_cast<uint64_t>(h.n_vocab),
                   layers = static_cast<uint64_t>(h.n_layer), batch_up = x_bytes + 4 * i32;
    const run_stats cpu = test::decode_stats(*m, nullptr, n_new);
    CHECK(cpu.decode_link.to_device == 0);
    CHECK(cpu.decode_link.to_host == 0);
    CHECK(cpu.decode_link.uploads + cpu.decode_link.downloads == 0);
    const auto per_token = [&](const run_stats& s) {
        const auto each = [](uint64_t v) { return std::to_string(v / n_new); };
        const std::string line = each(s.decode_link.to_device) + " B to the device in " +
                                 each(s.decode_link.uploads) + " copies, " +
                                 each(s.decode_link.to_host) + " B to the host in " +
                                 each(s.decode_link.downloads) + " copies per token";
        MESSAGE(line);
    };

    SUBCASE("every FFN neuron and dense block on the device: nothing per layer") {
        offload off(*m, cpu_device(), with_dense(*m, 1.0, 64));
        const run_stats s = test::decode_stats(*m, &off, n_new);
        per_token(s);
        CHECK(s.decode_link.to_device == n_new * batch_up);
        CHECK(s.decode_link.uploads == n_new * 3); // x, the batch's inputs, the KV view cell
        CHECK(s.decode_link.to_host == n_new * (logits + layers * i32));
        CHECK(s.decode_link.downloads == n_new * 2);
        CHECK(s.ffn_active_neurons == cpu.ffn_active_neurons); // counted from the device's lists
        CHECK(s.decode_bytes > 0);
        CHECK(s.link.cpu_wait_seconds == 0); // no layer is split
        CHECK(s.link.device_wait_seconds == 0);
    }
    SUBCASE("half of the FFN on the device, predicted there: the cold lists and x cross") {
        offload off(*m, cpu_device(), with_dense(*m, 0.5, 64));
        const run_stats s = test::decode_stats(*m, &off, n_new);
        per_token(s);
        CHECK(s.ffn_active_neurons == cpu.ffn_active_neurons);
        CHECK(s.decode_link.to_device == n_new * (batch_up + layers * x_bytes));
        CHECK(s.decode_link.uploads == n_new * (3 + layers));
        const uint64_t fixed = n_new * (logits + layers * i32 + layers * (i32 + x_bytes));
        REQUIRE(s.decode_link.to_host >= fixed);
        const uint64_t cold_list_bytes = s.decode_link.to_host - fixed;
        CHECK(cold_list_bytes % i32 == 0);
        CHECK(cold_list_bytes > 0);
        CHECK(cold_list_bytes < i32 * s.ffn_active_neurons); // some active neurons are hot
        CHECK(s.decode_link.downloads <= n_new * (2 + 3 * layers));
        // Each split layer waits on one side or the other: the CPU for the device's hot half, or
        // the device (done first) for the CPU's cold one.
        CHECK(s.link.cpu_wait_seconds > 0);
        CHECK(s.link.cpu_wait_seconds + s.link.device_wait_seconds > 0);
    }
    SUBCASE("hot neurons only, predicted on the host: xn and the hot rows go, partial sums come") {
        offload off(*m, cpu_device(), ffn_only(*m, 0.5));
        const run_stats s = test::decode_stats(*m, &off, n_new);
        per_token(s);
        CHECK(s.decode_link.to_host == n_new * layers * x_bytes);
        CHECK(s.decode_link.downloads == n_new * layers);
        const uint64_t fixed = n_new * (2 * i32 + layers * (x_bytes + i32));
        REQUIRE(s.decode_link.to_device > fixed);
        CHECK(s.decode_link.to_device - fixed < i32 * s.ffn_active_neurons);
    }
}
