// The fast kernels for AVX-512 (F, BW, VL), compiled with those sets enabled for this file only.
// F16 weights are widened with vcvtph2ps and every sum is a float FMA chain; half-precision
// arithmetic (AVX512-FP16) would lose accuracy and gains nothing on memory-bound loops.
#include "simd_impl.hpp"

// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" register and trip its own
// -Wuninitialized after inlining (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

namespace pi::cpu {

namespace {

struct avx512 {
    using vec = __m512;
    static constexpr int64_t lanes = 16;
    static constexpr int tile_rows = 4;
    static constexpr int tile_tokens = 6;
    static constexpr int decode_rows = 8;
    static constexpr int gather_tokens = 8;

    static __mmask16 first_lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

    static vec zero() { return _mm512_setzero_ps(); }
    static vec set1(float v) { return _mm512_set1_ps(v); }
    static vec load(const float* p) { return _mm512_loadu_ps(p); }
    static vec load(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static vec load_n(const float* p, int64_t n) {
        return _mm512_maskz_loadu_ps(first_lanes(n), p);
    }
    static vec load_n(const uint16_t* p, int64_t n) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first_lanes(n), p));
    }
    static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
    static void store_n(float* p, vec v, int64_t n) { _mm512_mask_storeu_ps(p, first_lanes(n), v); }
    static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
    static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
    static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
    static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
    static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
    static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
    static vec min(vec a, vec b) { return _mm512_min_ps(a, b); }
    static float sum(vec v) { return _mm512_reduce_add_ps(v); }
    static float first(vec v) { return _mm512_cvtss_f32(v); }
    static uint32_t ge_mask(vec a, vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
    static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
    static void prefetch_far(const void* p) {
        _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
    }

    static vec round_nearest(vec x) {
        return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    static vec scale_pow2(vec p, vec n) { return _mm512_scalef_ps(p, n); }
};

constexpr simd_kernels table = simd::impl<avx512>::table();

} // namespace

const simd_kernels& avx512_kernels() noexcept {
    return table;
}

} // namespace pi::cpu
