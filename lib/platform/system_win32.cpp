#include "platform/system.hpp"
#include "win32_text.hpp"

#include <psapi.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace pi::platform {

namespace {

MEMORYSTATUSEX memory_status() {
    MEMORYSTATUSEX status{};
    status.dwLength = sizeof status;
    if (!::GlobalMemoryStatusEx(&status)) status = MEMORYSTATUSEX{};
    return status;
}

} // namespace

std::size_t page_size() noexcept {
    SYSTEM_INFO info{};
    ::GetSystemInfo(&info);
    return info.dwPageSize != 0 ? info.dwPageSize : 4096;
}

std::size_t physical_ram() noexcept {
    return static_cast<std::size_t>(memory_status().ullTotalPhys);
}

std::size_t available_ram() noexcept {
    return static_cast<std::size_t>(memory_status().ullAvailPhys);
}

unsigned logical_cpus() noexcept {
    return std::max(1u, std::thread::hardware_concurrency());
}

long process_id() noexcept {
    return static_cast<long>(::GetCurrentProcessId());
}

std::string cpu_model_name() {
    wchar_t name[256] = {};
    DWORD size = sizeof name;
    if (::RegGetValueW(HKEY_LOCAL_MACHINE, L"HARDWARE\\DESCRIPTION\\System\\CentralProcessor\\0",
                       L"ProcessorNameString", RRF_RT_REG_SZ, nullptr, name,
                       &size) == ERROR_SUCCESS &&
        name[0] != L'\0')
        return win32::narrow(name);
    return "unknown";
}

std::size_t last_level_cache_bytes() {
    DWORD bytes = 0;
    ::GetLogicalProcessorInformation(nullptr, &bytes);
    std::vector<SYSTEM_LOGICAL_PROCESSOR_INFORMATION> info(
        bytes / sizeof(SYSTEM_LOGICAL_PROCESSOR_INFORMATION));
    if (info.empty() || !::GetLogicalProcessorInformation(info.data(), &bytes)) return 0;
    std::size_t largest = 0;
    for (const auto& entry : info)
        if (entry.Relationship == RelationCache)
            largest = std::max<std::size_t>(largest, entry.Cache.Size);
    return largest;
}

// Windows keeps no resettable high-water mark of the working set.
bool reset_peak_rss() {
    return false;
}

uint64_t peak_rss_bytes() {
    PROCESS_MEMORY_COUNTERS counters{};
    counters.cb = sizeof counters;
    if (!::GetProcessMemoryInfo(::GetCurrentProcess(), &counters, sizeof counters)) return 0;
    return static_cast<uint64_t>(counters.PeakWorkingSetSize);
}

// Windows has no load average.
std::string load_average() {
    return "";
}

// No Windows-on-ARM build exists; where one is made, IsProcessorFeaturePresent answers for the
// dot product (the SDKs that know the flag define it). FP16 has no such flag.
arm_extensions arm_cpu_extensions() noexcept {
    arm_extensions e;
#if (defined(_M_ARM64) || defined(__aarch64__)) && defined(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE)
    e.dotprod = ::IsProcessorFeaturePresent(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE) != 0;
#endif
    return e;
}

} // namespace pi::platform
