#pragma once
// The vector type of the AVX-512 (F, BW, VL) kernels, shared by simd_avx512.cpp and
// simd_avx512_vnni.cpp, which build their tables from it. Included only by those files, each
// compiled with the sets enabled; the anonymous namespace keeps every function local to them.

// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" register and trip its own
// -Wuninitialized after inlining (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

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
    // Writes c + k for the set bits k of `bits`, in ascending order, to out.
    static constexpr bool compress_indices = true;
    static void store_indices(int32_t* out, uint32_t bits, int64_t c) {
        const __m512i idx = _mm512_add_epi32(
            _mm512_set1_epi32(static_cast<int32_t>(c)),
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
        // Compressed in a register, then stored: a compressing store to memory is microcoded
        // and slow on some CPUs (AMD Zen 4).
        const auto keep = static_cast<__mmask16>(bits);
        _mm512_mask_storeu_epi32(out, static_cast<__mmask16>((1u << __builtin_popcount(bits)) - 1u),
                                 _mm512_maskz_compress_epi32(keep, idx));
    }
    static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
    static void prefetch_far(const void* p) {
        _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
    }

    static vec round_nearest(vec x) {
        return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    static vec scale_pow2(vec p, vec n) { return _mm512_scalef_ps(p, n); }

    // ---- quantized weights: two consecutive blocks per register, one per 256-bit half ----
    using ivec = __m512i;
    static constexpr int blocks = 2;
    static constexpr bool vnni = false;
    static constexpr int q_tokens = 8, q_decode = 8, q_gather = 8;

    static ivec izero() { return _mm512_setzero_si512(); }
    static ivec iset8(int8_t v) { return _mm512_set1_epi8(v); }
    static ivec iset32(int32_t v) { return _mm512_set1_epi32(v); }
    static ivec iand(ivec a, ivec b) { return _mm512_and_si512(a, b); }
    static ivec ior(ivec a, ivec b) { return _mm512_or_si512(a, b); }
    static ivec ixor(ivec a, ivec b) { return _mm512_xor_si512(a, b); }
    static ivec isub8(ivec a, ivec b) { return _mm512_sub_epi8(a, b); }
    static ivec ifirst(ivec a) { return _mm512_maskz_mov_epi32(0x00ff, a); }
    static ivec srli(ivec a, int n) { return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n)); }
    static ivec slli(ivec a, int n) { return _mm512_sll_epi32(a, _mm_cvtsi32_si128(n)); }
    static vec cvt(ivec a) { return _mm512_cvtepi32_ps(a); }
    static vec as_float(ivec a) { return _mm512_castsi512_ps(a); }

    // 128-bit lanes: the first block's low and high nibbles, then the second's.
    [[gnu::always_inline]] static ivec nibbles(const uint8_t* const* qs) {
        auto twice = [](const uint8_t* p) {
            return _mm256_broadcastsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        };
        const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(twice(qs[0])), twice(qs[1]), 1);
        return _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xff00ff00u, v, 4),
                                _mm512_set1_epi8(0x0f));
    }
    [[gnu::always_inline]] static ivec fifth_bits(const uint8_t* const* qh) {
        uint32_t lo, hi;
        __builtin_memcpy(&lo, qh[0], sizeof(lo));
        __builtin_memcpy(&hi, qh[1], sizeof(hi));
        return _mm512_maskz_mov_epi8(static_cast<__mmask64>(lo) | static_cast<__mmask64>(hi) << 32,
                                     _mm512_set1_epi8(0x10));
    }
    static __m256i load256(const void* p) {
        return _mm256_loadu_si256(static_cast<const __m256i*>(p));
    }
    [[gnu::always_inline]] static ivec join(const void* const* p) {
        return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p[0])), load256(p[1]), 1);
    }
    // One conversion for both scales, then each spread over its half.
    [[gnu::always_inline]] static vec halves(const uint16_t* h) {
        const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(h[0] | h[1] << 16));
        return _mm512_permutexvar_ps(
            _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
            _mm512_castps128_ps512(f));
    }
    static ivec iload(const void* p) { return _mm512_loadu_si512(p); }
    static ivec iload_first(const void* p) { return _mm512_maskz_loadu_epi32(0x00ff, p); }
    static vec fload(const float* p) { return _mm512_loadu_ps(p); }
    static vec fload_first(const float* p) { return _mm512_maskz_loadu_ps(0x00ff, p); }
    static ivec iadd(ivec a, ivec b) { return _mm512_add_epi32(a, b); }
    static ivec unpacklo32(ivec a, ivec b) { return _mm512_unpacklo_epi32(a, b); }
    static ivec unpackhi32(ivec a, ivec b) { return _mm512_unpackhi_epi32(a, b); }
    static ivec unpacklo64(ivec a, ivec b) { return _mm512_unpacklo_epi64(a, b); }
    static ivec unpackhi64(ivec a, ivec b) { return _mm512_unpackhi_epi64(a, b); }
    // 128-bit lanes (a0, b0, a2, b2) and (a1, b1, a3, b3).
    static ivec join_lo(ivec a, ivec b) {
        return _mm512_permutex2var_epi64(a, _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), b);
    }
    static ivec join_hi(ivec a, ivec b) {
        return _mm512_permutex2var_epi64(a, _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15), b);
    }
    // Rows a and a + 8 of the 16 in z[a], for the transpose of simd_quant_impl.hpp.
    [[gnu::always_inline]] static void pair_rows(const __m256i* rows, ivec (&z)[8]) {
#pragma GCC unroll 8
        for (int a = 0; a < 8; ++a)
            z[a] = _mm512_inserti64x4(_mm512_castsi256_si512(rows[a]), rows[a + 8], 1);
    }
    // The register of the two blocks' eight lanes each.
    static ivec from_halves(const __m256i (&h)[2]) {
        return _mm512_inserti64x4(_mm512_castsi256_si512(h[0]), h[1], 1);
    }
    // The eight floats of block k of a register.
    static __m256 half_of(vec v, int k) {
        return k == 0 ? _mm512_castps512_ps256(v)
                      : _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    }
    [[gnu::always_inline]] static ivec dot(ivec acc, ivec u, ivec x) {
        return _mm512_add_epi32(
            acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, x), _mm512_set1_epi16(1)));
    }
    // No vpsignb in AVX-512: |w| times x negated where w is negative.
    [[gnu::always_inline]] static ivec dot_signed(ivec w, ivec x) {
        const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), izero(), x);
        return dot(izero(), _mm512_abs_epi8(w), sx);
    }

    // A 16-float table indexed by the low four bits of each lane of idx.
    static constexpr bool table16 = true;
    static vec iota() {
        return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    }
    static vec lookup16(vec table, ivec idx) {
        return _mm512_permutexvar_ps(idx, table);
    }

    static ivec widen_u8(const uint8_t* p) {
        return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static ivec widen_i8(const int8_t* p) {
        return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    // 16 in each lane k whose bit e0 + k of `bits` is set.
    static ivec lane_bits(uint32_t bits, int64_t e0) {
        const __m512i shift = _mm512_add_epi32(
            _mm512_set1_epi32(static_cast<int32_t>(e0)),
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
        const __m512i bit = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int32_t>(bits)), shift),
            _mm512_set1_epi32(1));
        return _mm512_slli_epi32(bit, 4);
    }
};

} // namespace

} // namespace pi::cpu
