#pragma once
// The scale searches of ggml's K-quant reference quantizers (ggml-quants.c make_qx_quants,
// make_q3_quants, make_qkx2_quants), for quantize_k.cpp. Each reproduces the float operations of
// ggml's x86-64 build one for one, including which multiply-adds GCC fuses
// (docs/quantization.md); fused_multiply_add (fused.hpp) marks each fused one.
#include <bit>
#include <cmath>
#include <cstdint>

#include "quant/fused.hpp"

// The quantizers' fused multiply-adds are std::fma (a portable one on mingw-w64), exact whatever
// the CPU; without FMA instructions in the build's baseline each is a libm call, which makes the
// K-quant searches about four times slower. On x86-64 with GCC or Clang the hot functions are
// therefore also compiled for FMA and picked at load time (same results, bit for bit):
// PI_QUANT_FMA_CLONES on their definitions. Not under ThreadSanitizer: the compiler instruments the
// clones' ifunc resolver, which the dynamic loader runs before the sanitizer's runtime is
// initialised, and the program crashes at load time (docs/sanitizers.md).
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PI_QUANT_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define PI_QUANT_UNDER_TSAN 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(PI_QUANT_UNDER_TSAN)
#define PI_QUANT_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define PI_QUANT_FMA_CLONES
#endif

namespace pi::kquant {

// Round to the nearest integer, ties to even, by adding 1.5 * 2^23 and reading the mantissa
// bits: ggml's nearest_int. Valid for |v| < 2^22; beyond that the result is ggml's garbage.
inline int nearest_int(float v) noexcept {
    const int32_t bits = std::bit_cast<int32_t>(v + 12582912.0f);
    return (bits & 0x007fffff) - 0x00400000;
}

// nearest_int(a * b) where ggml's build fuses the product into the rounding addition.
inline int nearest_int_of_product(float a, float b) noexcept {
    const int32_t bits = std::bit_cast<int32_t>(fused_multiply_add(a, b, 12582912.0f));
    return (bits & 0x007fffff) - 0x00400000;
}

// Symmetric codes L[i] in [0, 2 * nmax) for n values, the scale found by trying 19 inverse
// scales around nmax / max and keeping the best x^2-weighted least-squares fit (Q6_K).
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) noexcept;

// Symmetric 3-bit-style codes in [0, 2 * nmax) refined element by element for up to five rounds
// (Q3_K).
float fit_symmetric_refined(int n, int nmax, const float* x, int8_t* L) noexcept;

// Codes L[i] in [0, nmax] with a scale and a minimum (x ~ scale * L - the_min, the_min >= 0),
// searching nstep + 1 inverse scales from (nmax + rmin) / range in steps of rdelta / range and
// keeping the fit with the lowest weighted error (absolute with use_mad, squared otherwise).
// Laux is scratch for n codes. Q2_K, Q4_K and Q5_K.
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                    float& the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                    bool use_mad) noexcept;

} // namespace pi::kquant
