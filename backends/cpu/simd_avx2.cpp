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

    // ---- quantized weights: one block per register ----
    using ivec = __m256i;
    static constexpr int blocks = 1;
    static constexpr bool vnni = false;
    static constexpr int q_tokens = 4, q_decode = 4, q_gather = 4;

    static ivec izero() { return _mm256_setzero_si256(); }
    static ivec iset8(int8_t v) { return _mm256_set1_epi8(v); }
    static ivec iset32(int32_t v) { return _mm256_set1_epi32(v); }
    static ivec iand(ivec a, ivec b) { return _mm256_and_si256(a, b); }
    static ivec ior(ivec a, ivec b) { return _mm256_or_si256(a, b); }
    static ivec ixor(ivec a, ivec b) { return _mm256_xor_si256(a, b); }
    static ivec isub8(ivec a, ivec b) { return _mm256_sub_epi8(a, b); }
    static ivec srli(ivec a, int n) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n)); }
    static ivec slli(ivec a, int n) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n)); }
    static vec cvt(ivec a) { return _mm256_cvtepi32_ps(a); }
    static vec as_float(ivec a) { return _mm256_castsi256_ps(a); }

    static vec halves(const uint16_t* h) { return set1(_cvtsh_ss(h[0])); }
    static ivec iload(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
    static vec fload(const float* p) { return _mm256_loadu_ps(p); }
    static ivec iadd(ivec a, ivec b) { return _mm256_add_epi32(a, b); }
    static ivec unpacklo32(ivec a, ivec b) { return _mm256_unpacklo_epi32(a, b); }
    static ivec unpackhi32(ivec a, ivec b) { return _mm256_unpackhi_epi32(a, b); }
    static ivec unpacklo64(ivec a, ivec b) { return _mm256_unpacklo_epi64(a, b); }
    static ivec unpackhi64(ivec a, ivec b) { return _mm256_unpackhi_epi64(a, b); }
    // 128-bit lanes (a0, b0) and (a1, b1).
    static ivec join_lo(ivec a, ivec b) { return _mm256_permute2x128_si256(a, b, 0x20); }
    static ivec join_hi(ivec a, ivec b) { return _mm256_permute2x128_si256(a, b, 0x31); }
    [[gnu::always_inline]] static void pair_rows(const __m256i* rows, ivec (&z)[8]) {
#pragma GCC unroll 8
        for (int a = 0; a < 8; ++a)
            z[a] = rows[a];
    }
    static ivec from_halves(const __m256i (&h)[1]) {
        return h[0];
    }
    static __m256 half_of(vec v, int) {
        return v;
    }
    [[gnu::always_inline]] static ivec dot(ivec acc, ivec u, ivec x) {
        return _mm256_add_epi32(
            acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)));
    }
    [[gnu::always_inline]] static ivec dot_signed(ivec w, ivec x) {
        return dot(izero(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    }

    // No compress store: select writes its indices one by one.
    static constexpr bool compress_indices = false;
    // No 16-float table lookup in one instruction: blocks convert their codes.
    static constexpr bool table16 = false;

    static ivec widen_u8(const uint8_t* p) {
        return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    }
    static ivec widen_i8(const int8_t* p) {
        return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    }
    // 16 in each lane k whose bit e0 + k of `bits` is set.
    static ivec lane_bits(uint32_t bits, int64_t e0) {
        const __m256i shift = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(e0)),
                                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i bit = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int32_t>(bits)), shift),
            _mm256_set1_epi32(1));
        return _mm256_slli_epi32(bit, 4);
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
