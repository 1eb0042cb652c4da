#include "cpu_features.hpp"

#include "cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#if defined(POWERINFER_CPU_X86)
#include <cpuid.h>
#endif
#if defined(POWERINFER_CPU_ARM64)
#include "arm_features.hpp"
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

// 1 for the x86 levels, 2 for the ARM ones, 0 for SCALAR.
int level_family(int32_t level) noexcept {
    if (level == PIB_CPU_KERNELS_AVX2 || level == PIB_CPU_KERNELS_AVX512) return 1;
    if (level == PIB_CPU_KERNELS_NEON || level == PIB_CPU_KERNELS_NEON_DOTPROD ||
        level == PIB_CPU_KERNELS_NEON_FP16)
        return 2;
    return 0;
}

// The next level down of a level's family; SCALAR below each family's lowest.
int32_t level_below(int32_t level) noexcept {
    switch (level) {
    case PIB_CPU_KERNELS_AVX512:
        return PIB_CPU_KERNELS_AVX2;
    case PIB_CPU_KERNELS_NEON_DOTPROD:
        return PIB_CPU_KERNELS_NEON;
    case PIB_CPU_KERNELS_NEON_FP16:
        return PIB_CPU_KERNELS_NEON_DOTPROD;
    default:
        return PIB_CPU_KERNELS_SCALAR;
    }
}

// The best supported level at or below `level` in its family.
int32_t supported_at_most(int32_t level) noexcept {
    while (!kernels_supported(level))
        level = level_below(level);
    return level;
}

int32_t best_kernels() noexcept {
    for (int32_t top : {PIB_CPU_KERNELS_AVX512, PIB_CPU_KERNELS_NEON_FP16}) {
        const int32_t level = supported_at_most(top);
        if (level != PIB_CPU_KERNELS_SCALAR) return level;
    }
    return PIB_CPU_KERNELS_SCALAR;
}

// The level an environment value names; -1 for an unknown name.
int32_t named_level(const char* name) noexcept {
    static constexpr struct {
        const char* name;
        int32_t level;
    } names[] = {{"scalar", PIB_CPU_KERNELS_SCALAR},
                 {"avx2", PIB_CPU_KERNELS_AVX2},
                 {"avx512", PIB_CPU_KERNELS_AVX512},
                 {"neon", PIB_CPU_KERNELS_NEON},
                 {"neon_dotprod", PIB_CPU_KERNELS_NEON_DOTPROD},
                 {"neon_fp16", PIB_CPU_KERNELS_NEON_FP16}};
    for (const auto& n : names)
        if (std::strcmp(name, n.name) == 0) return n.level;
    return -1;
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
#if defined(POWERINFER_CPU_ARM64)
    case PIB_CPU_KERNELS_NEON:
        return true;
    case PIB_CPU_KERNELS_NEON_DOTPROD:
        return arm_features().dotprod;
    case PIB_CPU_KERNELS_NEON_FP16:
        return arm_features().dotprod && arm_features().fp16 && arm_features().fhm;
#endif
    default:
        return false;
    }
}

int32_t auto_kernels() noexcept {
    const int32_t best = best_kernels();
    const char* env = std::getenv("POWERINFER_CPU_KERNELS");
    if (env == nullptr) return best;
    const int32_t wanted = named_level(env);
    // Another architecture's level, or an unknown name: the best level.
    if (wanted < 0 ||
        (wanted != PIB_CPU_KERNELS_SCALAR && level_family(wanted) != level_family(best)))
        return best;
    return supported_at_most(wanted);
}

const simd_kernels* kernels_table(int32_t level) noexcept {
    switch (level) {
#if defined(POWERINFER_CPU_X86)
    case PIB_CPU_KERNELS_AVX2:
        return &avx2_kernels();
    case PIB_CPU_KERNELS_AVX512:
        return has_avx512_vnni() ? &avx512_vnni_kernels() : &avx512_kernels();
#endif
#if defined(POWERINFER_CPU_ARM64)
    case PIB_CPU_KERNELS_NEON:
        return &neon_kernels();
    case PIB_CPU_KERNELS_NEON_DOTPROD:
        return &neon_dotprod_kernels();
    case PIB_CPU_KERNELS_NEON_FP16:
        return &neon_fp16_kernels();
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
    case PIB_CPU_KERNELS_NEON:
        return "cpu (neon)";
    case PIB_CPU_KERNELS_NEON_DOTPROD:
        return "cpu (neon_dotprod)";
    case PIB_CPU_KERNELS_NEON_FP16:
        return "cpu (neon_fp16)";
    default:
        return "cpu (scalar)";
    }
}

} // namespace pi::cpu
