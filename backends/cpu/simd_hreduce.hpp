#pragma once
// Horizontal reductions of 256-bit registers, shared by the quantized loops (simd_quant_impl.hpp,
// simd_kquant_impl.hpp). Templated on V like them so that each kernel level's copy, compiled with
// its own target flags, has its own linkage.
#include "simd_vector.hpp"

#include <immintrin.h>

#include <cstdint>

namespace pi::cpu::simd {

template <quant_vector V> struct hreduce {
    static float max8(__m256 v) {
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        return _mm_cvtss_f32(m);
    }
    static float sum4(__m128 s) {
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    static float sum8(__m256 v) {
        return sum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
    }
    static int32_t sum8(__m256i v) {
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
        return _mm_cvtsi128_si32(s);
    }
};

} // namespace pi::cpu::simd
