#pragma once
// Facts about the machine and the process.
#include <cstddef>
#include <cstdint>
#include <string>

namespace pi::platform {

std::size_t page_size() noexcept;

// Installed and currently available RAM in bytes; 0 when the OS does not say.
std::size_t physical_ram() noexcept;
std::size_t available_ram() noexcept;

// Logical CPUs this process may run on (at least 1).
unsigned logical_cpus() noexcept;

long process_id() noexcept;

// The CPU's marketing name; "unknown" when the OS does not say.
std::string cpu_model_name();

// Size of the largest CPU cache in bytes; 0 when unknown.
std::size_t last_level_cache_bytes();

// Starts a new peak-RSS window (the high-water mark lowered to the current RSS); false where the
// OS cannot, and peak_rss_bytes() then covers the whole process lifetime.
bool reset_peak_rss();

// Peak resident set size (working set on Windows) in bytes; 0 when unknown.
uint64_t peak_rss_bytes();

// The 1, 5 and 15 minute load averages, "" where the OS has none.
std::string load_average();

// The AArch64 extensions beyond NEON (part of the base architecture) that the CPU backend's kernel
// levels and pi_system_info ask about, as the OS reports them: the auxiliary vector's HWCAP bits on
// Linux, the hw.optional.arm sysctls on macOS. All false on other CPUs and other OSes.
struct arm_extensions {
    bool dotprod = false; // FEAT_DotProd: sdot, for the neon_dotprod level
    bool fp16 = false;    // FEAT_FP16: half-precision arithmetic
    bool fhm = false;     // FEAT_FHM: FP16 products accumulated into F32 (fmlal), for neon_fp16
};
arm_extensions arm_cpu_extensions() noexcept;

} // namespace pi::platform
