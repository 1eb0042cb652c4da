// The fast kernels for AVX2 with FMA and F16C, compiled with those sets enabled for this file
// only.
#include "simd_impl.hpp"

#include <immintrin.h>

namespace pi::cpu {

namespace {

// Lane masks for maskload/maskstore: 8 - n entries into this table start n all-ones lanes.
alignas(64) constexpr int32_t lane_masks[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};

struct avx2 {
    using vec = __m256;
    static constexpr int64_t lanes = 8;
    static constexpr int tile_rows = 2;
    static constexpr int tile_tokens = 4;
    static constexpr int decode_rows = 4;
    static constexpr int gather_tokens = 4;

    static __m256i first_lanes(int64_t n) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_masks + 8 - n));
    }

    static vec zero() { return _mm256_setzero_ps(); }
    static vec set1(float v) { return _mm256_set1_ps(v); }
    static vec load(const float* p) { return _mm256_loadu_ps(p); }
    static vec load(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static vec load_n(const float* p, int64_t n) { return _mm256_maskload_ps(p, first_lanes(n)); }
    // No masked 16-bit load before AVX-512: the tail goes through a zeroed copy.
    static vec load_n(const uint16_t* p, int64_t n) {
        alignas(16) uint16_t tail[8] = {};
        for (int64_t i = 0; i < n; ++i)
            tail[i] = p[i];
        return load(tail);
    }
    static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
    static void store_n(float* p, vec v, int64_t n) { _mm256_maskstore_ps(p, first_lanes(n), v); }
    static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
    static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
    static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
    static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
    static vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
    static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
    static vec min(vec a, vec b) { return _mm256_min_ps(a, b); }
    static float sum(vec v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    static float first(vec v) { return _mm256_cvtss_f32(v); }
    static uint32_t ge_mask(vec a, vec b) {
        return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GE_OQ)));
    }
    static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
    static void prefetch_far(const void* p) {
        _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
    }

    static vec round_nearest(vec x) {
        return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    // p * 2^n with n integral and in [-126, 127]: 2^n is built in the exponent field.
    static vec scale_pow2(vec p, vec n) {
        const __m256i e =
            _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        return mul(p, _mm256_castsi256_ps(e));
    }
};

constexpr simd_kernels table = simd::impl<avx2>::table();

} // namespace

const simd_kernels& avx2_kernels() noexcept {
    return table;
}

} // namespace pi::cpu
