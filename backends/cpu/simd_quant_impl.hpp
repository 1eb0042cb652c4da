#pragma once
// The Q4_0 and Q8_0 loops behind simd_kernels, written once with AVX2 integer intrinsics (both
// instruction-set files enable AVX2, FMA and F16C). Templated on the file's vector type V only so
// that, like simd_impl.hpp, every instantiation has internal linkage; no standard library calls.
//
// Dot products follow ggml: the activation row arrives quantized to Q8_0 blocks, each block
// product is an exact int32 (maddubs, then pairwise sums: see block_int), scaled by d_w * d_x
// and added to one float FMA chain per row in block order. The axpy dequantizes a block
// of 32 weights to floats and adds a * d * q with one FMA per element.
#include "cpu_simd.hpp"
#include "quant/blocks.hpp"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace pi::cpu::simd {

template <class V> struct quant_impl {
    static float half(uint16_t h) { return _cvtsh_ss(h); }

    // The 32 codes of a weight block as int8, in element order.
    static __m256i codes(const block_q4_0& b) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
        const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
        return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
    }
    static __m256i codes(const block_q8_0& b) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    }

    // Eight int32 partial sums of w . x over one block; x's codes lie in [-127, 127].
    static __m256i block_dot(__m256i w, __m256i x) {
        const __m256i prod = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
        return _mm256_madd_epi16(prod, _mm256_set1_epi16(1));
    }

    // The same eight int32 partial sums as block_dot(codes(b), x). Q4_0 multiplies the unsigned
    // nibbles and subtracts x8 = 8 * x's pairwise sums (shared by every row), which saves the
    // sign adjustments: (q - 8) * x = q * x - 8 * x, exactly, lane by lane.
    static __m256i block_int(const block_q4_0& b, __m256i x, __m256i x8) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
        const __m256i nibbles = _mm256_and_si256(
            _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f));
        const __m256i prod = _mm256_maddubs_epi16(nibbles, x);
        return _mm256_sub_epi32(_mm256_madd_epi16(prod, _mm256_set1_epi16(1)), x8);
    }
    static __m256i block_int(const block_q8_0& b, __m256i x, __m256i) {
        return block_dot(codes(b), x);
    }
    static __m256i times8(__m256i x) {
        const __m256i prod = _mm256_maddubs_epi16(_mm256_set1_epi8(8), x);
        return _mm256_madd_epi16(prod, _mm256_set1_epi16(1));
    }

    static float hsum(__m256 v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }

    template <class B> static const B* row(const quant_weights& w, int64_t r) {
        return reinterpret_cast<const B*>(w.data + static_cast<std::size_t>(r) * w.stride);
    }

    // Rows processed together: independent FMA chains hide their latency.
    static constexpr int tile = 4;

    // out[r] = w[r] . x for the R rows w[0 .. R); the rows `next` (R of them, or null) are
    // fetched into the cache at the pace these are read.
    template <class B, int R>
    static void dot_rows(const B* const* w, int64_t blocks, const block_q8_0* x, float* const* out,
                         const B* const* next) {
        // Consecutive prefetches at most a cache line apart.
        constexpr int64_t step = sizeof(B) <= 32 ? 2 : 1;
        __m256 acc[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
            acc[r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < blocks; ++b) {
            const __m256i xq = codes(x[b]);
            const __m256i x8 = times8(xq);
            const float dx = half(x[b].d);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                if (next != nullptr && b % step == 0)
                    _mm_prefetch(reinterpret_cast<const char*>(next[r] + b), _MM_HINT_T0);
                const __m256 d = _mm256_set1_ps(half(w[r][b].d) * dx);
                const __m256i s = block_int(w[r][b], xq, x8);
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
            *out[r] = hsum(acc[r]);
    }

    // A block's codes as block_dot_unpacked wants them: Q4_0 as the unsigned nibbles, Q8_0 as is.
    static __m256i unpacked(const block_q4_0& b) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
        return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                _mm256_set1_epi8(0x0f));
    }
    static __m256i unpacked(const block_q8_0& b) {
        return codes(b);
    }

    // block_int(b, x, x8) from u = unpacked(b), the same operations, so the same int32 lanes.
    template <class B> static __m256i block_dot_unpacked(__m256i u, __m256i x, __m256i x8) {
        if constexpr (sizeof(B) == sizeof(block_q4_0)) {
            const __m256i prod = _mm256_maddubs_epi16(u, x);
            return _mm256_sub_epi32(_mm256_madd_epi16(prod, _mm256_set1_epi16(1)), x8);
        } else {
            return block_dot(u, x);
        }
    }

    // Tokens of a prompt-batch register tile: AVX-512 files have 32 vector registers for the
    // R x T accumulators, AVX2 files 16.
    static constexpr int token_tile = sizeof(typename V::vec) == 64 ? 4 : 2;

    // *out[r * T + t] = w[r] . x[t] for R rows and T tokens. Each block of a row is unpacked once
    // for all T tokens and each token block once for all R rows; every output still gets
    // dot_rows' exact sequence: per block the same int32 lanes, scaled by half(d_w) * half(d_x),
    // one FMA into its own accumulator, one hsum at the end.
    template <class B, int R, int T>
    static void dot_tile(const B* const* w, int64_t blocks, const block_q8_0* const* x,
                         float* const* out) {
        __m256 acc[R][T];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
                acc[r][t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < blocks; ++b) {
            __m256i xq[T], x8[T];
            float dx[T];
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                xq[t] = codes(x[t][b]);
                x8[t] = times8(xq[t]);
                dx[t] = half(x[t][b].d);
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const __m256i u = unpacked(w[r][b]);
                const float dw = half(w[r][b].d);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    const __m256 d = _mm256_set1_ps(dw * dx[t]);
                    const __m256i s = block_dot_unpacked<B>(u, xq[t], x8[t]);
                    acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r][t]);
                }
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
                *out[r * T + t] = hsum(acc[r][t]);
    }

    // Rows [r0, r1) against the T tokens x[0 .. T) into the T output rows y[0 .. T).
    template <class B, int T>
    static void tile_rows(const quant_weights& w, int64_t r0, int64_t r1,
                          const block_q8_0* const* x, float* const* y) {
        int64_t r = r0;
        for (; r + tile <= r1; r += tile) {
            const B* wr[tile];
            float* out[tile * T];
#pragma GCC unroll 4
            for (int i = 0; i < tile; ++i) {
                wr[i] = row<B>(w, r + i);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t)
                    out[i * T + t] = y[t] + r + i;
            }
            dot_tile<B, tile, T>(wr, w.blocks, x, out);
        }
        for (; r < r1; ++r) {
            const B* wr = row<B>(w, r);
            float* out[T];
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
                out[t] = y[t] + r;
            dot_tile<B, 1, T>(&wr, w.blocks, x, out);
        }
    }

    // Rows stay in the cache while token tiles pass over them; x holds n_tok activation rows of
    // w.blocks blocks back to back.
    template <class B>
    static void mul_mat_t(const quant_weights& w, int64_t r0, int64_t r1, const block_q8_0* x,
                          int64_t n_tok, f32_rows_out y) {
        auto out_row = [&](int64_t t) {
            return reinterpret_cast<float*>(reinterpret_cast<std::byte*>(y.data) +
                                            static_cast<std::size_t>(t) * y.stride);
        };
        int64_t t = 0;
        for (; t + token_tile <= n_tok; t += token_tile) {
            const block_q8_0* xs[token_tile];
            float* ys[token_tile];
#pragma GCC unroll 4
            for (int i = 0; i < token_tile; ++i) {
                xs[i] = x + (t + i) * w.blocks;
                ys[i] = out_row(t + i);
            }
            tile_rows<B, token_tile>(w, r0, r1, xs, ys);
        }
        for (; t < n_tok; ++t) {
            const block_q8_0* xs = x + t * w.blocks;
            float* ys = out_row(t);
            tile_rows<B, 1>(w, r0, r1, &xs, &ys);
        }
    }

    static void mul_mat_q(const quant_weights& w, int64_t r0, int64_t r1, const block_q8_0* x,
                          int64_t n_tok, f32_rows_out y) {
        if (w.q8)
            mul_mat_t<block_q8_0>(w, r0, r1, x, n_tok, y);
        else
            mul_mat_t<block_q4_0>(w, r0, r1, x, n_tok, y);
    }

    template <class B>
    static void mul_rows_t(const quant_weights& w, const int32_t* rows, int64_t first, int64_t n,
                           const block_q8_0* x, float* y) {
        auto index = [&](int64_t i) { return rows != nullptr ? rows[i] : first + i; };
        int64_t i = 0;
        for (; i + tile <= n; i += tile) {
            const B* wr[tile];
            const B* next[tile];
            float* out[tile];
            const bool more = i + 2 * tile <= n;
#pragma GCC unroll 4
            for (int r = 0; r < tile; ++r) {
                wr[r] = row<B>(w, index(i + r));
                next[r] = more ? row<B>(w, index(i + tile + r)) : nullptr;
                out[r] = y + index(i + r);
            }
            dot_rows<B, tile>(wr, w.blocks, x, out, more ? next : nullptr);
        }
        for (; i < n; ++i) {
            const B* wr = row<B>(w, index(i));
            float* out = y + index(i);
            dot_rows<B, 1>(&wr, w.blocks, x, &out, nullptr);
        }
    }

    static void mul_rows_q(const quant_weights& w, const int32_t* rows, int64_t first, int64_t n,
                           const block_q8_0* x, float* y) {
        if (w.q8)
            mul_rows_t<block_q8_0>(w, rows, first, n, x, y);
        else
            mul_rows_t<block_q4_0>(w, rows, first, n, x, y);
    }

    // The 32 codes of a block as four groups of eight floats.
    static void widen(__m256i q, __m256 (&f)[4]) {
        const __m128i lo = _mm256_castsi256_si128(q);
        const __m128i hi = _mm256_extracti128_si256(q, 1);
        f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
        f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
        f[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
        f[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
    }

    // y[0 .. 32) += s * codes q.
    static void axpy_block(__m256i q, __m256 s, float* y) {
        __m256 f[4];
        widen(q, f);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g)
            _mm256_storeu_ps(y + 8 * g, _mm256_fmadd_ps(s, f[g], _mm256_loadu_ps(y + 8 * g)));
    }

    // y[0 .. 32) += s0 * q0, then += s1 * q1.
    static void axpy_block2(__m256i q0, __m256 s0, __m256i q1, __m256 s1, float* y) {
        __m256 f0[4], f1[4];
        widen(q0, f0);
        widen(q1, f1);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
            const __m256 v = _mm256_fmadd_ps(s0, f0[g], _mm256_loadu_ps(y + 8 * g));
            _mm256_storeu_ps(y + 8 * g, _mm256_fmadd_ps(s1, f1[g], v));
        }
    }

    // y[32 * b0 .. 32 * b1) += coef * dequant(w) for the rows with nonzero coefficients, two
    // rows per pass over y (each element still gets their FMAs in list order). The next two
    // listed rows are fetched into the cache at the pace these are read.
    template <class B>
    static void axpy_rows_t(const quant_weights& wt, const int32_t* rows, int64_t n, const float* a,
                            float* y, int64_t b0, int64_t b1) {
        constexpr int64_t step = sizeof(B) <= 32 ? 2 : 1;
        int64_t k = 0;
        while (k < n) {
            const B* wr[2];
            float coef[2];
            int m = 0;
            for (; k < n && m < 2; ++k) {
                if (a[rows[k]] == 0.0f) continue;
                coef[m] = a[rows[k]];
                wr[m++] = row<B>(wt, rows[k]);
            }
            if (m == 0) break;
            const B* next0 = row<B>(wt, rows[k < n ? k : n - 1]);
            const B* next1 = row<B>(wt, rows[k + 1 < n ? k + 1 : n - 1]);
            for (int64_t b = b0; b < b1; ++b) {
                if ((b - b0) % step == 0) {
                    _mm_prefetch(reinterpret_cast<const char*>(next0 + b), _MM_HINT_T0);
                    _mm_prefetch(reinterpret_cast<const char*>(next1 + b), _MM_HINT_T0);
                }
                if (m == 2)
                    axpy_block2(codes(wr[0][b]), _mm256_set1_ps(coef[0] * half(wr[0][b].d)),
                                codes(wr[1][b]), _mm256_set1_ps(coef[1] * half(wr[1][b].d)),
                                y + b * qk8_0);
                else
                    axpy_block(codes(wr[0][b]), _mm256_set1_ps(coef[0] * half(wr[0][b].d)),
                               y + b * qk8_0);
            }
        }
    }

    static void axpy_rows_q(const quant_weights& wt, const int32_t* rows, int64_t n, const float* a,
                            float* y, int64_t b0, int64_t b1) {
        if (wt.q8)
            axpy_rows_t<block_q8_0>(wt, rows, n, a, y, b0, b1);
        else
            axpy_rows_t<block_q4_0>(wt, rows, n, a, y, b0, b1);
    }
};

} // namespace pi::cpu::simd
