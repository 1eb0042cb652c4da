#include "cpu_features.hpp"

#include "cpu_backend.h"

#include <cstdlib>
#include <cstring>
#if defined(POWERINFER_CPU_X86)
#include <cpuid.h>
#endif

namespace pi::cpu {

namespace {

#if defined(POWERINFER_CPU_X86)
// CPUID leaf 1, ECX bit 29. Read directly: Clang before 16 has no "f16c" for
// __builtin_cpu_supports.
bool has_f16c() noexcept {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

// F16C ships with every AVX2 CPU, but is checked anyway since the kernels rely on it.
bool has_avx2() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
}

bool has_avx512() noexcept {
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

bool has_avx512_vnni() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
}
#endif

int32_t best_kernels() noexcept {
    if (kernels_supported(PIB_CPU_KERNELS_AVX512)) return PIB_CPU_KERNELS_AVX512;
    if (kernels_supported(PIB_CPU_KERNELS_AVX2)) return PIB_CPU_KERNELS_AVX2;
    return PIB_CPU_KERNELS_SCALAR;
}

} // namespace

bool kernels_supported(int32_t level) noexcept {
    switch (level) {
    case PIB_CPU_KERNELS_SCALAR:
        return true;
#if defined(POWERINFER_CPU_X86)
    case PIB_CPU_KERNELS_AVX2:
        return has_avx2();
    case PIB_CPU_KERNELS_AVX512:
        return has_avx512();
#endif
    default:
        return false;
    }
}

int32_t auto_kernels() noexcept {
    const int32_t best = best_kernels();
    const char* env = std::getenv("POWERINFER_CPU_KERNELS");
    if (env == nullptr) return best;
    int32_t wanted = best;
    if (std::strcmp(env, "scalar") == 0) wanted = PIB_CPU_KERNELS_SCALAR;
    if (std::strcmp(env, "avx2") == 0) wanted = PIB_CPU_KERNELS_AVX2;
    if (std::strcmp(env, "avx512") == 0) wanted = PIB_CPU_KERNELS_AVX512;
    return wanted < best ? wanted : best;
}

const simd_kernels* kernels_table(int32_t level) noexcept {
    switch (level) {
#if defined(POWERINFER_CPU_X86)
    case PIB_CPU_KERNELS_AVX2:
        return &avx2_kernels();
    case PIB_CPU_KERNELS_AVX512:
        return has_avx512_vnni() ? &avx512_vnni_kernels() : &avx512_kernels();
#endif
    default:
        return nullptr;
    }
}

const char* device_name(int32_t level) noexcept {
    switch (level) {
    case PIB_CPU_KERNELS_AVX2:
        return "cpu (avx2)";
    case PIB_CPU_KERNELS_AVX512:
        return "cpu (avx512)";
    default:
        return "cpu (scalar)";
    }
}

} // namespace pi::cpu
