// The offload path through the GPU kernel sources: the CPU simulation module (libpowerinfer-gpusim,
// built from backends/gpu_common like the CUDA and HIP modules) is the device, holding the dense
// blocks, the KV cache and hot neurons of F16, Q4_0 and Q8_0 models, so every device kernel the
// engine calls runs here as it would on a GPU. Tokens must equal CPU-only inference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "engine/context.hpp"
#include "engine/offload.hpp"
#include "engine/placement.hpp"
#include "model/model.hpp"
#include "model/quantize_model.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "test_env.hpp"

#include "hybrid_runs.hpp"

using namespace pi;

namespace {

constexpr int n_steps = 3;

const std::string& scratch() {
    static const std::string dir = test::scratch_dir("hybrid_gpusim");
    return dir;
}

std::string model_path(ggml_type type) {
    const std::string& dir = scratch();
    static const std::string f32 =
        test::write_tiny_model(dir, "sparse.gguf", test::tiny_model_options(true));
    if (type == ggml_type::f32) return f32;
    const std::string out = dir + "/sparse-" + traits_of(type).name + ".gguf";
    quantize_options o;
    o.target = parse_quantize_type(traits_of(type).name);
    o.leave_output = true; // the mix would make output.weight Q8_0 (8-bit activations on the CPU)
    o.n_threads = 1;
    quantize_model(f32, out, o);
    return out;
}

int32_t argmax(const std::vector<float>& v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::unique_ptr<device> gpusim() {
    try {
        return std::make_unique<device>(device::from_module("gpusim", 0));
    } catch (const error& e) {
        MESSAGE("the gpusim module is not usable: ", e.what());
        return nullptr;
    }
}

// The offload of `m` on a fresh simulated device: every block and `fraction` of the FFN.
offload_result place_fraction(const model& m, ggml_type type, double fraction) {
    auto dev = gpusim();
    REQUIRE(dev);
    pib_device_info info{};
    REQUIRE(dev->vt().device_info(dev->ctx(), &info) == PIB_OK);
    offload_request r;
    r.model_path = scratch() + "/index-" + traits_of(type).name + ".gguf";
    r.reset_gpu_index = true;
    r.kv_n_ctx = 64;
    // The planner's own totals for everything on the device: the budget is what the dense
    // part, KV cache and scratch take, plus the fraction of the FFN.
    planner::plan_input everything =
        plan_input_for(m, 0, max_offload_batch, r.kv_n_ctx, info.weight_types);
    everything.budget = uint64_t{1} << 50;
    for (const auto& l : everything.layers)
        everything.frequencies.emplace_back(static_cast<size_t>(l.n_ff), 1.0f);
    const planner::plan all = planner::make_plan(everything);
    REQUIRE(all.bytes_ffn > 0);
    r.budget =
        static_cast<int64_t>(all.bytes_total - all.bytes_ffn +
                             static_cast<uint64_t>(fraction * static_cast<double>(all.bytes_ffn)));
    offload_result placed = place_on_device(m, std::move(dev), r);
    REQUIRE(placed.placed);
    return placed;
}

pib_graph_stats graph_counters(const offload& off) {
    pib_graph_stats g{};
    REQUIRE(off.dev().vt().graph_stats(off.dev().ctx(), &g) == PIB_OK);
    return g;
}

} // namespace

// The simulation runs each GPU thread as a fiber, slowly: four models, a few steps each.
TEST_CASE("the GPU kernels on the simulated device match CPU-only inference for F32, F16, Q4_0 "
          "and Q8_0 models") {
    for (ggml_type type : {ggml_type::f32, ggml_type::f16, ggml_type::q4_0, ggml_type::q8_0}) {
        const std::string type_name = traits_of(type).name;
        CAPTURE(type_name);
        const auto m = model::load(model_path(type), load_options{});
        std::vector<int32_t> tokens;
        const auto cpu = test::decode_run(*m, nullptr, tokens, n_steps);
        float scale = 0;
        for (const auto& step : cpu)
            for (float v : step)
                scale = std::max(scale, std::abs(v));
        // The CPU's fast quantized kernels round activations to 8 bits; the GPU's do not, so
        // quantized models are compared by logits along the CPU's tokens.
        const bool exact_types = type == ggml_type::f32 || type == ggml_type::f16;
        const float tolerance = (exact_types ? 1e-3f : 5e-2f) * scale;
        // All neurons hot for F32 and F16 (layers wholly on the device), 40% for the quantized
        // models.
        const double fraction = exact_types ? 1.0 : 0.4;
        CAPTURE(fraction);
        const offload_result placed = place_fraction(*m, type, fraction);
        CHECK(placed.plan.attn_on_device[0]);
        CHECK(placed.plan.output_on_device);
        CHECK(placed.plan.kv_on_device);
        // Quantizing gives the predictor Q5_0 except for Q4_0 targets (docs/quantization.md); the
        // GPU kernels lack Q5_0, so that predictor stays on the CPU and the rest still goes to the
        // device. The F32 file is not quantized.
        const bool device_predicts = type == ggml_type::q4_0 || type == ggml_type::f32;
        CHECK(placed.plan.predictor_on_device[0] == device_predicts);
        uint64_t hot = 0;
        for (const auto& l : placed.plan.hot)
            hot += l.size();
        CHECK(hot > 0);
        const auto dev_steps = test::decode_run(*m, placed.placed.get(), tokens, n_steps);
        REQUIRE(dev_steps.size() == cpu.size());
        for (size_t i = 0; i < cpu.size(); ++i) {
            CAPTURE(i);
            float diff = 0;
            for (size_t j = 0; j < cpu[i].size(); ++j)
                diff = std::max(diff, std::abs(dev_steps[i][j] - cpu[i][j]));
            CHECK(diff <= tolerance);
            if (exact_types) CHECK(argmax(dev_steps[i]) == argmax(cpu[i]));
        }
        // What a decoded token sends over (docs/hybrid.md): with the predictor and every neuron
        // on the device, only the batch goes, in three copies (embedded x; position, cell and
        // output row together; the KV view's cell), and the logits and the layers' list lengths
        // come back, in two downloads.
        const run_stats s = test::decode_stats(*m, placed.placed.get(), 2);
        const auto& h = m->hp();
        const std::string line =
            type_name + ": per decoded token " + std::to_string(s.decode_link.to_device / 2) +
            " B to the device in " + std::to_string(s.decode_link.uploads / 2) + " copies, " +
            std::to_string(s.decode_link.to_host / 2) + " B to the host in " +
            std::to_string(s.decode_link.downloads / 2) + " copies";
        MESSAGE(line);
        if (type == ggml_type::f32) {
            CHECK(s.decode_link.to_device == 2 * (4 * static_cast<uint64_t>(h.n_embd) + 16));
            CHECK(s.decode_link.to_host == 2 * 4 * static_cast<uint64_t>(h.n_vocab + h.n_layer));
            CHECK(s.decode_link.uploads == 2 * 3);
            CHECK(s.decode_link.downloads == 2 * 2);
        } else {
            CHECK(s.decode_link.downloads > 2 * 2);
        }
        if (type == ggml_type::q4_0) { // split layers predicted on the device: on the transfer
            // stream, a prompt's cold lists come down in one copy per layer, as a token's do
            const run_stats p = test::prompt_stats(*m, placed.placed.get());
            CHECK(p.link.downloads <= 2 + 3 * static_cast<uint64_t>(h.n_layer));
        }
    }
}

// Decode as graphs (docs/hybrid.md): a decoded token's kernels are recorded and submitted as a
// few graphs, which the next token launches again unchanged while its arguments stay the same;
// the logits have the bits of launching each kernel as it is called (POWERINFER_GPU_GRAPHS=0).
TEST_CASE("decoded tokens submit their device kernels as graphs, replayed unchanged, with the "
          "logits of kernel-by-kernel launches") {
    // F32 with every neuron hot: layers wholly on the device. Q4_0 with 40%: split layers, the
    // device predicting, the transfer stream carrying the cold lists between the graphs.
    for (const auto& [type, fraction] :
         {std::pair{ggml_type::f32, 1.0}, std::pair{ggml_type::q4_0, 0.4}}) {
        const std::string type_name = traits_of(type).name;
        CAPTURE(type_name);
        const auto m = model::load(model_path(type), load_options{});
        const offload_result placed = place_fraction(*m, type, fraction);
        const offload& off = *placed.placed;
        REQUIRE(off.dev().has_graphs());

        std::vector<int32_t> tokens;
        const pib_graph_stats before = graph_counters(off);
        const auto as_graphs = test::decode_run(*m, &off, tokens, n_steps);
        const pib_graph_stats after = graph_counters(off);
        CHECK(after.kernels > before.kernels);
        CHECK(after.graphs_created > before.graphs_created);
        // n_ctx = 64 cells: the device's attention spans all of them at every step, so from the
        // second decoded token on each graph is launched as it was made.
        CHECK(after.graphs_replayed > before.graphs_replayed);

        REQUIRE(test::set_env("POWERINFER_GPU_GRAPHS", "0") == 0);
        std::vector<int32_t> same_tokens = tokens;
        const pib_graph_stats plain_before = graph_counters(off);
        const auto one_by_one = test::decode_run(*m, &off, same_tokens, n_steps);
        const pib_graph_stats plain_after = graph_counters(off);
        REQUIRE(test::unset_env("POWERINFER_GPU_GRAPHS") == 0);
        CHECK(plain_after.kernels == plain_before.kernels); // nothing recorded
        REQUIRE(one_by_one.size() == as_graphs.size());
        for (size_t i = 0; i < as_graphs.size(); ++i) {
            CAPTURE(i);
            CHECK(one_by_one[i] == as_graphs[i]);
        }

        // What a decoded token costs to submit, in the context's stats, and how the graphs of
        // a context's prompt and first decoded tokens were come by.
        const pib_graph_stats before_stats = graph_counters(off);
        const run_stats s = test::decode_stats(*m, &off, 2);
        const pib_graph_stats g = graph_counters(off);
        const std::string line =
            type_name + ": per decoded token " + std::to_string(s.decode_device_kernels / 2) +
            " kernels in " + std::to_string(s.decode_device_launches / 2) +
            " submissions; prompt and 2 tokens: graphs " +
            std::to_string(g.graphs_created - before_stats.graphs_created) + " made, " +
            std::to_string(g.graphs_updated - before_stats.graphs_updated) + " updated, " +
            std::to_string(g.graphs_replayed - before_stats.graphs_replayed) + " replayed";
        MESSAGE(line);
        CHECK(s.decode_device_kernels > 0);
        if (fraction == 1.0) // between the batch's upload and the logits' download: one graph
            CHECK(s.decode_device_launches == 2);
        else
            CHECK(s.decode_device_launches * 4 <= s.decode_device_kernels);
    }
}
