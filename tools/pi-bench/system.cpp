#include "system.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

namespace pi::bench {

namespace {

std::string trim(std::string s) {
    const auto not_space = [](unsigned char c) { return c != ' ' && c != '\t' && c != '\n'; };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
}

// Value of the first "key<spaces>: value" line of a /proc-style file, or "".
std::string proc_field(const char* path, std::string_view key) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const size_t colon = line.find(':');
        if (colon != std::string::npos && trim(line.substr(0, colon)) == key)
            return trim(line.substr(colon + 1));
    }
    return "";
}

// Parses sysfs cache sizes such as "260M", "4096K" or "32768".
size_t parse_cache_size(const std::string& text) {
    size_t value = 0;
    size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
        value = value * 10 + static_cast<size_t>(text[i++] - '0');
    if (i < text.size() && text[i] == 'K')
        value <<= 10;
    else if (i < text.size() && text[i] == 'M')
        value <<= 20;
    else if (i < text.size() && text[i] == 'G')
        value <<= 30;
    return value;
}

} // namespace

std::string cpu_model_name() {
    for (const char* key : {"model name", "Model", "Processor", "cpu model"}) {
        std::string name = proc_field("/proc/cpuinfo", key);
        if (!name.empty()) return name;
    }
    return "unknown";
}

unsigned logical_cpus() {
    return std::max(1u, std::thread::hardware_concurrency());
}

size_t last_level_cache_bytes() {
    size_t largest = 0;
    for (int index = 0; index < 16; ++index) {
        std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) +
                         "/size");
        std::string text;
        if (!(in >> text)) break;
        largest = std::max(largest, parse_cache_size(text));
    }
    return largest;
}

bool reset_peak_rss() {
    // "5" resets the peak RSS of the process (Linux 4.0+, see proc(5)).
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    out.flush();
    return static_cast<bool>(out);
}

uint64_t peak_rss_bytes() {
    const std::string hwm = proc_field("/proc/self/status", "VmHWM"); // "12345 kB"
    if (!hwm.empty()) {
        std::istringstream in(hwm);
        uint64_t kib = 0;
        if (in >> kib) return kib * 1024;
    }
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return static_cast<uint64_t>(usage.ru_maxrss) * 1024; // KiB on Linux
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    if (!(in >> one >> five >> fifteen)) return "";
    return one + " " + five + " " + fifteen;
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
