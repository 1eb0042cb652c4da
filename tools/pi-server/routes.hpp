#pragma once
// The HTTP routes (docs/server.md): OpenAI's, llama.cpp's /tokenize and /detokenize, /health,
// /metrics and the chat page, registered on one httplib::Server.
#include <atomic>
#include <cstdint>
#include <string>

#include "powerinfer.h"
#include "scheduler.hpp"
#include "server_options.hpp"

namespace httplib {
class Server;
}

namespace pi_server {

class metrics;

struct server_state {
    pi_model* model = nullptr;
    scheduler* jobs = nullptr;
    const server_options* options = nullptr;
    metrics* counters = nullptr;
    std::string model_id;              // the alias
    int64_t created = 0;               // Unix time the model was loaded
    std::atomic<bool> draining{false}; // set by the signal thread: new requests get 503
};

void register_routes(httplib::Server& server, server_state& state);

} // namespace pi_server
