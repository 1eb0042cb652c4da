#include "engine/placement.hpp"

#include <algorithm>
#include <filesystem>

#include "engine/context.hpp"
#include "gguf/gguf.hpp"
#include "planner/activation_stats.hpp"
#include "planner/gpu_index.hpp"
#include "platform/files.hpp"
#include "support/error.hpp"
#include "support/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {

namespace {

constexpr uint64_t safety_margin = uint64_t(256) << 20; // as PowerInfer: free VRAM − 256 MiB

// Varied English prose for calibration when no statistics file exists.
constexpr const char* calibration_text =
    "The old lighthouse keeper climbed the spiral stairs every evening, counting the steps as his "
    "father had taught him. Below, the harbour filled with fishing boats returning before the "
    "storm. "
    "In the village school, children learned to multiply fractions, to name the rivers of three "
    "continents and to write letters to a pen friend in another country. A recipe for bread needs "
    "flour, water, salt and yeast; patience does the rest. Engineers measure twice and cut once, "
    "while physicists argue about whether time flows or merely appears to. When the market opened, "
    "prices of copper rose sharply, and analysts wrote that demand from electric vehicles would "
    "keep growing for a decade. She opened the laptop, compiled the program, and watched the tests "
    "pass one by one: green, green, green. Questions: what is the capital of Australia? How many "
    "legs does a spider have? Why is the sky blue during the day but red at sunset?";

std::vector<std::vector<float>> frequencies_for(const model& m, const offload_request& r,
                                                std::string& source) {
    if (!r.stats_path.empty()) {
        source = "statistics " + r.stats_path;
        return planner::load_activation_stats(r.stats_path).counts;
    }
    const std::filesystem::path folder =
        platform::utf8_path(r.model_path).parent_path() / "activation";
    if (std::filesystem::is_directory(folder)) {
        source = "PowerInfer statistics " + platform::utf8_string(folder);
        return planner::load_activation_stats(platform::utf8_string(folder)).counts;
    }
    source = "calibration over the built-in text";
    return calibrate_activations(m, 1);
}

} // namespace

std::vector<std::vector<float>> calibrate_activations(const model& m, int32_t n_threads) {
    context_options o;
    o.n_ctx = 256;
    o.n_batch = 64;
    o.n_threads = n_threads;
    o.count_activations = true;
    context ctx(m, o);
    const std::vector<int32_t> tokens = m.vocab().encode(calibration_text, true);
    const size_t n = std::min<size_t>(tokens.size(), static_cast<size_t>(o.n_ctx));
    for (size_t at = 0; at < n; at += static_cast<size_t>(o.n_batch)) {
        const size_t len = std::min(n - at, static_cast<size_t>(o.n_batch));
        ctx.decode(batch_view{std::span<const int32_t>(tokens.data() + at, len), {}, {}});
    }
    return ctx.activation_counts();
}

planner::plan_input plan_input_for(const model& m, uint64_t budget, int32_t n_batch,
                                   int32_t kv_n_ctx, uint64_t weight_types) {
    const hparams& h = m.hp();
    const auto supported = [weight_types](std::initializer_list<const pib_tensor*> tensors) {
        return std::all_of(tensors.begin(), tensors.end(), [weight_types](const pib_tensor* t) {
            return (weight_types & PIB_TYPE_BIT(t->type)) != 0;
        });
    };
    planner::plan_input in;
    for (const layer_weights& w : m.layers()) {
        planner::layer_geometry g{packed_bytes({&w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo}),
                                  packed_bytes({&w.fc1, &w.fc2}), packed_bytes({&w.ffn_norm}),
                                  w.up.nb1 + w.gate.nb1 + w.down_t.nb1, h.n_ff};
        g.attn_supported = supported({&w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo});
        g.predictor_supported = supported({&w.fc1, &w.fc2});
        g.ffn_norm_supported = supported({&w.ffn_norm});
        g.ffn_supported = supported({&w.up, &w.gate, &w.down_t});
        in.layers.push_back(g);
    }
    in.output_bytes = packed_bytes({&m.output_norm(), &m.output()});
    in.output_supported = supported({&m.output_norm(), &m.output()});
    in.kv_bytes_per_layer = kv_n_ctx > 0 ? kv_cache::device_layer_bytes(h, kv_n_ctx) : 0;
    in.scratch_bytes = device_arena_bytes(m, n_batch, h.n_ff);
    in.alignment = static_cast<uint32_t>(device_tensor_alignment);
    in.budget = budget;
    return in;
}

offload_result place_on_device(const model& m, std::unique_ptr<device> dev,
                               const offload_request& r) {
    offload_result out;
    if (!m.sparse_inference()) return out;
    pib_device_info info{};
    device::check("reading the device's properties", dev->vt().device_info(dev->ctx(), &info));
    const uint64_t budget = r.budget >= 0                      ? static_cast<uint64_t>(r.budget)
                            : info.memory_free > safety_margin ? info.memory_free - safety_margin
                                                               : 0;
    if (r.kv_n_ctx < 0)
        fail(status::invalid_argument, "the KV cache size to reserve is negative (", r.kv_n_ctx,
             ")");
    planner::plan_input in = plan_input_for(m, budget, r.n_batch, r.kv_n_ctx, info.weight_types);
    const std::string index_path = planner::gpu_index_path(r.model_path);
    const std::string fingerprint = planner::model_fingerprint(m.file());
    std::optional<planner::plan> cached;
    if (r.disable_gpu_index) {
        cached = planner::make_plan(in); // no frequencies: every FFN neuron stays on the CPU
        out.source = "nowhere (GPU index disabled)";
    } else if (!r.reset_gpu_index) {
        if (auto hot = planner::load_gpu_index(index_path, fingerprint, m.hp().n_layer, m.hp().n_ff,
                                               budget)) {
            cached = planner::make_plan_with_hot(in, *hot);
            out.source = "GPU index " + index_path;
        }
    }
    if (cached) {
        out.plan = std::move(*cached);
    } else {
        in.frequencies = frequencies_for(m, r, out.source);
        out.plan = planner::make_plan(in);
        planner::gpu_index index;
        index.hot = out.plan.hot;
        index.n_ff = out.plan.n_ff;
        index.vram_capacity = out.plan.bytes_ffn;
        index.fingerprint = fingerprint;
        index.budget = budget;
        try {
            planner::write_gpu_index(index_path, index);
        } catch (const error& e) {
            log(log_level::warn, concat("could not cache the GPU index: ", e.what()));
        }
    }
    log(log_level::info, concat("device placement (hot neurons from ", out.source, "):\n",
                                planner::describe(out.plan)));
    const planner::plan& p = out.plan;
    const bool any =
        p.output_on_device ||
        std::any_of(p.hot.begin(), p.hot.end(), [](const auto& h) { return !h.empty(); }) ||
        std::find(p.attn_on_device.begin(), p.attn_on_device.end(), true) !=
            p.attn_on_device.end() ||
        std::find(p.predictor_on_device.begin(), p.predictor_on_device.end(), true) !=
            p.predictor_on_device.end();
    if (any) out.placed = std::make_unique<offload>(m, std::move(dev), placement_of(p, r.kv_n_ctx));
    return out;
}

} // namespace pi
