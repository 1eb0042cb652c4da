#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat_turns.hpp"
#include "options.hpp"
#include "parallel.hpp"
#include "summary.hpp"

namespace pi::bench {

struct model_facts {
    std::string path;
    std::string label; // file name without directory and .gguf
    std::string architecture;
    std::string weight_type;
    uint64_t file_size = 0;
    uint64_t n_params = 0;
    int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0;
    bool sparse_file = false;
};

// What the model placed on an offload device (pi_model_info); device empty: nothing.
struct offload_facts {
    std::string device;
    uint64_t bytes = 0;
    int attn_layers = 0, predictor_layers = 0;
    bool output = false;
    int kv_n_ctx = 0;
    double hot_fraction = 0; // FFN neurons on the device over all FFN neurons
};

struct test_result {
    std::string name; // "pp" or "tg"
    int n_tokens = 0;
    summary tokens_per_second;
};

struct run_result {
    model_facts model;
    mode run_mode = mode::sparse;
    int threads = 0;
    int n_ctx = 0;
    int n_batch = 0;
    std::optional<test_result> pp, tg;
    // Engine statistics over the timed tg runs.
    uint64_t decode_bytes = 0;
    uint64_t decode_tokens = 0;
    double ffn_active_fraction = 0;
    // Copies between the host and the offload device over the timed tg runs (docs/hybrid.md).
    uint64_t decode_bytes_to_device = 0, decode_bytes_to_host = 0, decode_downloads = 0;
    double cpu_wait_seconds = 0, device_wait_seconds = 0;
    // Graph sessions on the device: the kernels of the timed decoded tokens and the
    // submissions they took (0 and 0 without graphs).
    uint64_t decode_device_kernels = 0, decode_device_launches = 0;
    uint64_t kv_cache_bytes = 0; // F16 K and V of every layer for n_ctx positions
    uint64_t peak_rss = 0;
    bool peak_rss_of_run_only = false; // false: the peak covers the whole process so far
    offload_facts offload;
    std::optional<parallel_result> parallel;  // --parallel
    std::vector<chat_turn_result> chat_turns; // --chat-turns

    double per_decode_token(double v) const {
        return decode_tokens ? v / static_cast<double>(decode_tokens) : 0;
    }
    double bytes_per_token() const {
        return decode_tokens
                   ? static_cast<double>(decode_bytes) / static_cast<double>(decode_tokens)
                   : 0;
    }
};

enum class outcome { done, skipped, failed };

// Loads one model in one mode, runs the pp and tg tests (and --parallel, --chat-turns) and fills
// `out`. `message` explains a
// skip (a dense file cannot run sparse) or a failure (with pi_last_error()).
outcome run_benchmark(const std::string& path, mode m, const options& o, run_result& out,
                      std::string& message);

} // namespace pi::bench
