#include "support/log.hpp"

#include <cstdio>
#include <mutex>

namespace pi {

namespace {
std::mutex sink_mutex;
log_sink current_sink = nullptr;
void* current_user_data = nullptr;
} // namespace

void set_log_sink(log_sink sink, void* user_data) {
    std::lock_guard lock(sink_mutex);
    current_sink = sink;
    current_user_data = user_data;
}

void log(log_level level, const std::string& message) {
    std::lock_guard lock(sink_mutex);
    if (current_sink) {
        current_sink(level, message.c_str(), current_user_data);
    } else if (level >= log_level::warn) {
        std::fprintf(stderr, "powerinfer: %s: %s\n", level == log_level::warn ? "warning" : "error",
                     message.c_str());
    }
}

} // namespace pi
