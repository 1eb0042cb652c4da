#pragma once
// Per-neuron activation statistics, the planner's input for choosing hot neurons
// (docs/planner.md): our GGUF file, or PowerInfer's folder of activation_<l>.pt tensors.
#include <cstdint>
#include <string>
#include <vector>

namespace pi::planner {

struct activation_stats {
    uint64_t tokens = 0; // tokens profiled; 0 when unknown (PowerInfer's folders do not say)
    std::vector<std::vector<float>> counts; // per layer, per neuron; finite, >= 0
};

inline constexpr const char* activation_stats_arch = "powerinfer.activation_stats";

// Our format: GGUF with general.architecture = "powerinfer.activation_stats",
// powerinfer.activation_stats.block_count (u32), powerinfer.activation_stats.tokens (u64) and
// tensors blk.N.activation_count F32 [n_ff]. Errors are pi::error naming the file and the key or
// tensor.
activation_stats read_activation_stats(const std::string& path);
void write_activation_stats(const std::string& path, const activation_stats& stats);

// PowerInfer's folder: activation_<l>.pt for l = 0..L-1, in numeric order (activation_2 before
// activation_10); other files are ignored. A gap or a duplicate layer number is an error.
activation_stats read_powerinfer_activations(const std::string& dir);

// A folder is read as PowerInfer's, a file as ours.
activation_stats load_activation_stats(const std::string& path);

} // namespace pi::planner
