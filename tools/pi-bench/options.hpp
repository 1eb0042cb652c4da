#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pi::bench {

enum class mode { sparse, dense };

const char* mode_name(mode m);

struct options {
    std::vector<std::string> models;
    int n_prompt = 64;
    int n_gen = 64;
    int repetitions = 5;
    int threads = 2;
    int warmup = 1;
    int n_ctx = 0; // 0: n_prompt + n_gen + ctx_slack
    std::vector<mode> modes{mode::sparse, mode::dense};
    bool json = false;
    bool bandwidth = true;
    double vram_budget_gib = -1;   // < 0: not given (the library's default: no offload without a GPU)
    std::string offload_device;    // empty: the library's default ("auto")
};

// Extra KV cache positions beyond the longest test, as llama-bench leaves a little headroom.
inline constexpr int ctx_slack = 16;

void print_usage();

// Parses argv; on failure returns nothing and sets `error` to a one-line reason. `help` is set
// when -h/--help was given (and nothing else is checked).
std::optional<options> parse_options(int argc, char** argv, std::string& error, bool& help);

} // namespace pi::bench
