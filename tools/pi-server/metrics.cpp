#include "metrics.hpp"

#include <cmath>
#include <cstdio>

namespace pi_server {
namespace {

// A label value with \, " and newlines escaped, as the text format wants.
std::string label_value(std::string_view text) {
    std::string out;
    for (const char c : text) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

std::string number(double v) {
    if (std::isnan(v)) return "NaN";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

void sample(std::string& out, const char* name, const char* type, const char* help,
            const std::string& value) {
    header(out, name, type, help);
    out += name;
    out += ' ';
    out += value;
    out += '\n';
}

} // namespace

void metrics::count_request(std::string_view route, int status) {
    std::lock_guard lock(mutex_);
    auto it = requests_.find(route);
    if (it == requests_.end())
        it = requests_.emplace(std::string(route), std::map<int, uint64_t>{}).first;
    ++it->second[status];
}

uint64_t metrics::requests(std::string_view route, int status) const {
    std::lock_guard lock(mutex_);
    const auto it = requests_.find(route);
    if (it == requests_.end()) return 0;
    const auto code = it->second.find(status);
    return code == it->second.end() ? 0 : code->second;
}

std::string metrics::prometheus_text(const scheduler_stats& stats) const {
    std::string out;
    header(out, "powerinfer_requests_total", "counter",
           "HTTP requests answered, by route and status code.");
    {
        std::lock_guard lock(mutex_);
        for (const auto& [route, codes] : requests_)
            for (const auto& [code, count] : codes)
                out += "powerinfer_requests_total{route=\"" + label_value(route) + "\",code=\"" +
                       std::to_string(code) + "\"} " + std::to_string(count) + "\n";
    }
    sample(out, "powerinfer_prompt_tokens_total", "counter",
           "Prompt tokens decoded (tokens reused from a slot's cache are not counted).",
           std::to_string(stats.prompt_tokens));
    sample(out, "powerinfer_generated_tokens_total", "counter", "Tokens generated.",
           std::to_string(stats.generated_tokens));
    sample(out, "powerinfer_prompt_seconds_total", "counter",
           "Seconds of decoding steps spent on prompt tokens.", number(stats.prompt_seconds));
    sample(out, "powerinfer_decode_seconds_total", "counter",
           "Seconds of decoding steps spent on generated tokens.", number(stats.decode_seconds));
    sample(
        out, "powerinfer_decode_tokens_per_second", "gauge",
        "Generated tokens per second of decoding, over the server's life.",
        number(stats.decode_seconds > 0.0 ? stats.generated_tokens / stats.decode_seconds : 0.0));
    sample(out, "powerinfer_queue_length", "gauge", "Requests waiting for a free slot.",
           std::to_string(stats.queue_length));
    sample(out, "powerinfer_slots_busy", "gauge", "Slots running a request.",
           std::to_string(stats.slots_busy));
    sample(out, "powerinfer_slots_total", "gauge", "Slots (-np).", std::to_string(stats.n_slots));
    sample(out, "powerinfer_requests_in_flight", "gauge",
           "Completion requests being answered (queued or generating).",
           std::to_string(in_flight()));
    sample(out, "powerinfer_ffn_active_fraction", "gauge",
           "Average fraction of FFN neurons computed per layer and token.",
           number(stats.ffn_active_fraction));
    sample(out, "powerinfer_requests_cancelled_total", "counter",
           "Generations cancelled because their client went away.", std::to_string(cancelled()));
    return out;
}

} // namespace pi_server
