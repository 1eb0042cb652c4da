#pragma once
// The GPU index cache file `<model>.generated.gpuidx` (docs/planner.md): PowerInfer's
// layout (GGUF, magic PWRI, tensors blk.l.gpu_idx / blk.l.gpu_bucket by position), plus our keys
// powerinfer.gpu_index.fingerprint and powerinfer.gpu_index.budget that make a stale cache
// detectable.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pi::gguf {
class file;
}

namespace pi::planner {

struct gpu_index {
    std::vector<std::vector<int32_t>> hot; // per layer, ascending neuron ids on the device
    std::vector<int32_t> n_ff;             // per layer: the length of blk.l.gpu_idx
    uint64_t vram_capacity = 0;            // split.vram_capacity
    std::string fingerprint;               // empty in files written by PowerInfer
    std::optional<uint64_t> budget;        // set exactly when fingerprint is non-empty
};

inline constexpr const char* gpu_index_fingerprint_key = "powerinfer.gpu_index.fingerprint";
inline constexpr const char* gpu_index_budget_key = "powerinfer.gpu_index.budget";

// "<model path>.generated.gpuidx", where PowerInfer looks for it.
std::string gpu_index_path(const std::string& model_path);

// "<file size>-<16 hex digits>": the size of the model file and the 64-bit FNV-1a hash of its
// bytes before the data section (header, metadata, tensor infos).
std::string model_fingerprint(const gguf::file& model);

// Parses and validates a GPU index file: 2·L I32 tensors taken by position, gpu_idx values 0/1,
// bucket = the ascending ids whose gpu_idx is 1. pi::error(io / format) naming the file.
gpu_index read_gpu_index(const std::string& path);
// Writes through gguf::writer (temporary file + rename). pi::error(invalid_argument) when the
// hot sets are not ascending ids below n_ff or fingerprint and budget are not set together.
void write_gpu_index(const std::string& path, const gpu_index& index);

// The cached hot sets when the file at `path` fits this model and budget; otherwise nullopt with
// a log line saying why (absent, malformed, other layer count or n_ff, other model fingerprint,
// other budget, or a PowerInfer file whose split.vram_capacity exceeds `budget`). Never throws
// for a bad file.
std::optional<std::vector<std::vector<int32_t>>> load_gpu_index(const std::string& path,
                                                                const std::string& fingerprint,
                                                                int32_t n_layer, int32_t n_ff,
                                                                uint64_t budget);

} // namespace pi::planner
