#pragma once
// Which kernel level (pib_cpu_kernels) the CPU runs, decided at run time so that one build
// serves machines with and without AVX2 or AVX-512.
#include "cpu_simd.hpp"

#include <cstdint>

namespace pi::cpu {

// True when this build has the level and the CPU (and OS) can execute it; SCALAR always is.
bool kernels_supported(int32_t level) noexcept;

// The level PIB_CPU_KERNELS_AUTO resolves to: the best supported one, or the one named by the
// environment variable POWERINFER_CPU_KERNELS (scalar, avx2, avx512, neon, neon_dotprod) when it
// is supported; a named level the CPU lacks falls back to the best supported level below it in
// its family, and another architecture's level (or an unknown name) gives the best level.
int32_t auto_kernels() noexcept;

// The table of a supported level; null for SCALAR (the reference kernels).
const simd_kernels* kernels_table(int32_t level) noexcept;

// "cpu (scalar)", "cpu (avx2)", "cpu (avx512)", "cpu (neon)" or "cpu (neon_dotprod)".
const char* device_name(int32_t level) noexcept;

} // namespace pi::cpu
