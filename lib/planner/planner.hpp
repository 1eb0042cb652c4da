#pragma once
// Device placement of a sparse model under a memory budget (docs/planner.md).
// Plain data in, plain data out: the engine describes the model's geometry, the planner decides
// which dense tensors and which hot FFN neurons live on the device.
//
// Byte accounting: every device allocation is rounded up to `alignment`. The allocations are
//   scratch                      one, scratch_bytes
//   per layer attention          one, attn_bytes       (attn_norm + q + k + v + o packed)
//   per layer predictor          one, predictor_bytes  (fc1 + fc2 packed)
//   per layer ffn norm           one, ffn_norm_bytes
//   output                       one, output_bytes     (output_norm + output packed)
//   KV cache                     one per layer, kv_bytes_per_layer (K and V packed)
//   per layer with k > 0 hot     two: k * neuron_bytes (gathered up/gate/down_t rows) and
//                                     k * 4 (the I32 bucket of hot neuron ids)
// A group's byte count must include any padding the engine puts between the tensors it packs.
// A group of 0 bytes allocates nothing.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pi::planner {

struct layer_geometry {
    uint64_t attn_bytes = 0;      // attn_norm + q + k + v + o
    uint64_t predictor_bytes = 0; // fc1 + fc2
    uint64_t ffn_norm_bytes = 0;
    uint64_t neuron_bytes = 0; // one neuron's row of up + gate + down_t on the device
    int32_t n_ff = 0;
    // false: the device cannot compute with the group's weight types; the group stays on the CPU
    // without ending the dense placement, and an unsupported FFN gets no hot neurons.
    bool attn_supported = true, predictor_supported = true, ffn_norm_supported = true,
         ffn_supported = true;
};

struct plan_input {
    std::vector<layer_geometry> layers;
    uint64_t output_bytes = 0; // output_norm + output
    bool output_supported = true;
    uint64_t kv_bytes_per_layer = 0;
    uint64_t scratch_bytes = 0;      // activations the device needs
    uint64_t budget = 0;             // 0: no device, everything on the CPU
    uint32_t alignment = 256;        // a power of two
    int32_t neuron_granularity = 32; // hot counts per layer are multiples of this, or n_ff
    // Per layer, per neuron activation frequency or count (finite, >= 0). Empty: no statistics,
    // the FFN stays on the CPU.
    std::vector<std::vector<float>> frequencies;
};

struct plan {
    std::vector<bool> attn_on_device, predictor_on_device, ffn_norm_on_device;
    bool output_on_device = false;
    bool kv_on_device = false;
    std::vector<std::vector<int32_t>> hot; // ascending neuron ids per layer on the device
    std::vector<int32_t> n_ff;             // per layer, copied from the input
    uint64_t budget = 0;
    // bytes_dense = bytes_attn + bytes_predictor + bytes_ffn_norm + bytes_output;
    // bytes_total = bytes_dense + bytes_kv + bytes_scratch + bytes_ffn <= budget.
    uint64_t bytes_attn = 0, bytes_predictor = 0, bytes_ffn_norm = 0, bytes_output = 0;
    uint64_t bytes_dense = 0, bytes_kv = 0, bytes_scratch = 0, bytes_ffn = 0, bytes_total = 0;
};

// Scratch first (pi::error(out_of_memory) naming the shortfall when it does not fit a non-zero
// budget), then attention layer by layer, predictors, ffn norms, output (skipping unsupported
// groups), stopping at the first group that does not fit; when all of them fit, the KV cache (all
// or nothing) and the FFN: hot neurons chosen globally across layers in chunks of
// neuron_granularity by activation frequency per byte. pi::error(invalid_argument) for inconsistent
// input.
plan make_plan(const plan_input& in);

// The same dense placement, with the FFN hot sets taken from a cache (a GPU index file) instead
// of being solved. nullopt, with a log line saying why, when the sets do not fit the remaining
// budget, the dense part did not fit completely, or a count is neither a multiple of the
// granularity nor the full layer. pi::error(invalid_argument) when the sets are malformed
// (layer count, ids out of range or not ascending). Frequencies are not needed.
std::optional<plan> make_plan_with_hot(const plan_input& in,
                                       const std::vector<std::vector<int32_t>>& hot);

// Device bytes of k hot neurons in one layer, alignment included (0 for k == 0).
uint64_t ffn_layer_bytes(const layer_geometry& layer, int32_t k, uint32_t alignment);

// A multi-line report: MiB per category, the budget, and hot neurons per layer.
std::string describe(const plan& p);

} // namespace pi::planner
