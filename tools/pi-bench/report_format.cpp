#include "report_format.hpp"

#include <cmath>
#include <cstdio>

namespace pi::bench {

std::string fmt(const char* format, double value) {
    char text[64];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

std::string fixed(double value, int decimals) {
    if (!std::isfinite(value)) return "-";
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
    return text;
}

std::string bytes_binary(double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) return fmt("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    if (bytes >= 1024.0 * 1024) return fmt("%.2f MiB", bytes / (1024.0 * 1024));
    return fmt("%.2f KiB", bytes / 1024.0);
}

std::string count_si(double n) {
    if (n >= 1e9) return fmt("%.2f B", n / 1e9);
    if (n >= 1e6) return fmt("%.2f M", n / 1e6);
    return fmt("%.2f K", n / 1e3);
}

std::string speed(const summary& s) {
    return fixed(s.median, 2) + " ± " + fixed(s.stddev, 2);
}

std::string model_cell(const model_facts& m) {
    return m.label + " " + m.weight_type;
}

void json_summary(json_writer& j, const summary& s) {
    j.begin_object();
    j.key("median");
    j.number(s.median);
    j.key("mean");
    j.number(s.mean);
    j.key("stddev");
    j.number(s.stddev);
    j.key("min");
    j.number(s.min);
    j.key("max");
    j.number(s.max);
    j.key("samples");
    j.begin_array();
    for (double v : s.samples)
        j.number(v);
    j.end_array();
    j.end_object();
}

void json_integers(json_writer& j, std::initializer_list<std::pair<const char*, uint64_t>> fields) {
    for (const auto& [name, value] : fields) {
        j.key(name);
        j.integer(value);
    }
}

} // namespace pi::bench
