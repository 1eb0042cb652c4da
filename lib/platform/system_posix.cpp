#include "platform/system.hpp"

#include <sys/resource.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

namespace pi::platform {

namespace {

std::string trim(std::string s) {
    const auto not_space = [](unsigned char c) { return c != ' ' && c != '\t' && c != '\n'; };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
}

// Value of the first "key<spaces>: value" line of a /proc-style file, or "".
std::string proc_field(const char* path, const std::string& key) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const std::size_t colon = line.find(':');
        if (colon != std::string::npos && trim(line.substr(0, colon)) == key)
            return trim(line.substr(colon + 1));
    }
    return "";
}

// Parses sysfs cache sizes such as "260M", "4096K" or "32768".
std::size_t parse_cache_size(const std::string& text) {
    std::size_t value = 0;
    std::size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
        value = value * 10 + static_cast<std::size_t>(text[i++] - '0');
    if (i < text.size() && text[i] == 'K')
        value <<= 10;
    else if (i < text.size() && text[i] == 'M')
        value <<= 20;
    else if (i < text.size() && text[i] == 'G')
        value <<= 30;
    return value;
}

#if defined(__aarch64__) && defined(__APPLE__)
// A hw.optional.* flag: 1 when the CPU has the feature, 0 or absent (older macOS) when not.
bool sysctl_flag(const char* name) noexcept {
    int32_t value = 0;
    std::size_t size = sizeof value;
    return ::sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}
#endif

[[maybe_unused]] std::size_t pages_bytes(long pages) {
    const long page = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0 ||
        static_cast<std::size_t>(pages) >
            std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(page))
        return 0;
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

} // namespace

std::size_t page_size() noexcept {
    const long page = ::sysconf(_SC_PAGESIZE);
    return page > 0 ? static_cast<std::size_t>(page) : 4096;
}

std::size_t physical_ram() noexcept {
#if defined(_SC_PHYS_PAGES)
    return pages_bytes(::sysconf(_SC_PHYS_PAGES));
#else
    return 0;
#endif
}

std::size_t available_ram() noexcept {
#if defined(_SC_AVPHYS_PAGES)
    return pages_bytes(::sysconf(_SC_AVPHYS_PAGES));
#else
    return 0;
#endif
}

unsigned logical_cpus() noexcept {
    return std::max(1u, std::thread::hardware_concurrency());
}

long process_id() noexcept {
    return static_cast<long>(::getpid());
}

std::string cpu_model_name() {
    for (const char* key : {"model name", "Model", "Processor", "cpu model"}) {
        std::string name = proc_field("/proc/cpuinfo", key);
        if (!name.empty()) return name;
    }
#if defined(__APPLE__)
    char brand[256] = {};
    std::size_t size = sizeof brand;
    if (::sysctlbyname("machdep.cpu.brand_string", brand, &size, nullptr, 0) == 0 && brand[0])
        return brand;
#endif
    return "unknown";
}

std::size_t last_level_cache_bytes() {
    std::size_t largest = 0;
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
    if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
#if defined(__APPLE__)
    return static_cast<uint64_t>(usage.ru_maxrss); // bytes on macOS
#else
    return static_cast<uint64_t>(usage.ru_maxrss) * 1024; // KiB on Linux
#endif
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    if (!(in >> one >> five >> fifteen)) return "";
    return one + " " + five + " " + fifteen;
}

arm_extensions arm_cpu_extensions() noexcept {
    arm_extensions e;
#if defined(__aarch64__) && defined(__linux__)
    const unsigned long hwcap = ::getauxval(AT_HWCAP);
    e.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
    e.fp16 = (hwcap & HWCAP_ASIMDHP) != 0;
    e.fhm = (hwcap & HWCAP_ASIMDFHM) != 0;
#elif defined(__aarch64__) && defined(__APPLE__)
    e.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    e.fp16 = sysctl_flag("hw.optional.arm.FEAT_FP16");
    e.fhm = sysctl_flag("hw.optional.arm.FEAT_FHM");
#endif
    return e;
}

} // namespace pi::platform
