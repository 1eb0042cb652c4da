#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pi::bench {

// The machine facts a report records, from lib/platform (docs/platform.md says what each OS
// gives).

// "model name" from /proc/cpuinfo (or the best equivalent); "unknown" when absent.
std::string cpu_model_name();

unsigned logical_cpus();

// Size of the largest CPU cache in bytes (0 when unknown).
size_t last_level_cache_bytes();

// Starts a new peak-RSS window: the kernel's high-water mark is lowered to the current RSS so
// the next peak_rss_bytes() covers only what follows. Returns false where that is not possible
// (peak_rss_bytes() then covers the whole process lifetime).
bool reset_peak_rss();

// Peak resident set size in bytes (VmHWM, else getrusage's ru_maxrss; the peak working set on
// Windows).
uint64_t peak_rss_bytes();

// The 1, 5 and 15 minute load averages from /proc/loadavg ("" when unavailable): other work
// competing for the CPUs and memory makes every number of a benchmark worse.
std::string load_average();

// Today's date as YYYY-MM-DD (UTC).
std::string today_utc();

} // namespace pi::bench
