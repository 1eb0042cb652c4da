#include "system.hpp"

#include <chrono>
#include <cstdio>

#include "platform/system.hpp"

namespace pi::bench {

std::string cpu_model_name() {
    return platform::cpu_model_name();
}

unsigned logical_cpus() {
    return platform::logical_cpus();
}

size_t last_level_cache_bytes() {
    return platform::last_level_cache_bytes();
}

bool reset_peak_rss() {
    return platform::reset_peak_rss();
}

uint64_t peak_rss_bytes() {
    return platform::peak_rss_bytes();
}

std::string load_average() {
    return platform::load_average();
}

std::string today_utc() {
    const std::chrono::year_month_day day{
        std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now())};
    char text[16];
    std::snprintf(text, sizeof text, "%04d-%02u-%02u", static_cast<int>(day.year()),
                  static_cast<unsigned>(day.month()), static_cast<unsigned>(day.day()));
    return text;
}

} // namespace pi::bench
