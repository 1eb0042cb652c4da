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
    double vram_budget_gib = -1; // < 0: not given (the library's default: no offload without a GPU)
    std::string offload_device;  // empty: the library's default ("auto")
    int parallel = 1;            // > 1: also N sequences decoded together (parallel.hpp)
    int chat_turns = 0; // > 0: also a chat of that many turns with cache reuse (chat_turns.hpp)
};

// Extra KV cache positions beyond the longest test, as llama-bench leaves a little headroom.
inline constexpr int ctx_slack = 16;

// Parses argv; on a usage error writes one line on stderr and returns nothing. -h and --help
// print the usage text and exit.
std::optional<options> parse_options(int argc, char** argv);

} // namespace pi::bench
