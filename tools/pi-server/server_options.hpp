#pragma once
// pi-server's command line, named as llama.cpp's server names its flags.
#include <cstdint>
#include <string>

#include "scheduler.hpp"

namespace pi_server {

struct server_options {
    std::string model_path;               // -m
    std::string model_alias;              // -a/--alias; default: the file name without .gguf
    std::string host = "127.0.0.1";       // --host
    int port = 8080;                      // --port
    std::string api_key;                  // --api-key (also $PI_API_KEY); empty: no key needed
    std::string chat_template;            // --chat-template; empty: the model's
    int32_t http_threads = 0;             // --threads-http; 0: max(32, 2 n_slots + 8)
    size_t max_body_bytes = 1 << 20;      // --max-body-bytes
    int32_t max_prompt_tokens = 0;        // --max-prompt-tokens; 0: the slot's context
    int32_t default_max_tokens = -1;      // -n/--n-predict for requests that name none
    double request_timeout_seconds = 600; // --timeout: socket read/write timeout
    bool verbose = false;
    scheduler_options scheduling; // -np, -c, -b, -t, --max-queue
    // The offload flags of `powerinfer`.
    bool dense = false;          // --dense
    double vram_budget_gib = -1; // --vram-budget GiB (< 0: free VRAM minus a margin)
    bool vram_budget_given = false;
    std::string offload_device;     // --offload-device
    bool reset_gpu_index = false;   // --reset-gpu-index
    bool disable_gpu_index = false; // --disable-gpu-index
    std::string activation_stats;   // --activation-stats
};

// Parses argv into *options. Returns 0 to run, or 2 after printing one line naming the bad flag
// on stderr; -h/--help prints the usage on stdout and exits with status 0.
int parse_server_options(int argc, char** argv, server_options* options);

} // namespace pi_server
