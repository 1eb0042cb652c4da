#pragma once
// The quantized-weight loops behind simd_kernels, written once for Q4_0, Q4_1, Q5_0, Q5_1 and
// Q8_0 over the vector type V of an instruction-set file. Templated on V so that, like
// simd_impl.hpp, every instantiation has internal linkage; no standard library calls.
//
// Products follow ggml: activations are quantized to 8-bit blocks (prepare_q) and every block
// product is exact integer arithmetic, scaled once. Weight codes are made unsigned (Q4_0 and
// Q5_0 codes as stored, Q8_0 codes + 128 with VNNI), so that one u8 x s8 instruction (vpdpbusd,
// or maddubs then madd without VNNI) gives the eight int32 sums of four consecutive products;
// the offset times the activations' group sums, precomputed per block, corrects them exactly.
// Without VNNI, Q8_0 codes stay signed (maddubs could saturate on codes + 128).
//
// A register holds V::blocks consecutive blocks of one (row, token) product, eight lanes each:
// one for AVX2, two (even and odd blocks) for AVX-512. A row with an odd number of blocks ends
// with a register whose activation half is zero, which adds exactly nothing.
//
// V provides, besides simd_impl.hpp's float operations: ivec; blocks; vnni; the tile shapes
// q_rows x q_tokens (prompt products), q_decode (rows of one token) and q_gather (tokens of one
// row); per block of the register, from one pointer each: nibbles (the 32 codes of 16 packed
// bytes), fifth_bits (0x10 for each set bit of a Q5 qh word), join (32 bytes), halves (a
// binary16 value broadcast to the block's lanes); iload, fload (V::blocks consecutive 32-byte
// chunks) and iload_first, fload_first (the first chunk, the others zero); dot(acc, u, x) (acc +
// the group sums of u * x, u unsigned), dot_signed (without VNNI), cvt (int32 to float),
// as_float; and for dequantizing L columns: widen_u8, widen_i8, lane_bits (16 where bit e0 +
// lane of a word is set), srli, iand, ior, ixor, iset8, iset32, izero.
#include "cpu_simd.hpp"
#include "quant/blocks.hpp"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace pi::cpu::simd {

// How the kernels read a block type. offset: added to the stored codes to make them unsigned
// (0 for codes already unsigned, and for Q8_0 without VNNI, whose codes stay signed: signed);
// min: the block has a minimum m, x = d * q + m; bits: Q5's fifth bits in qh.
template <class B, bool vnni> struct qfmt;
template <bool vnni> struct qfmt<block_q4_0, vnni> {
    static constexpr int offset = 8;
    static constexpr bool min = false, bits = false, is_signed = false;
};
template <bool vnni> struct qfmt<block_q4_1, vnni> {
    static constexpr int offset = 0;
    static constexpr bool min = true, bits = false, is_signed = false;
};
template <bool vnni> struct qfmt<block_q5_0, vnni> {
    static constexpr int offset = 16;
    static constexpr bool min = false, bits = true, is_signed = false;
};
template <bool vnni> struct qfmt<block_q5_1, vnni> {
    static constexpr int offset = 0;
    static constexpr bool min = true, bits = true, is_signed = false;
};
template <bool vnni> struct qfmt<block_q8_0, vnni> {
    static constexpr int offset = vnni ? 128 : 0;
    static constexpr bool min = false, bits = false, is_signed = !vnni;
};

template <class V> struct quant_impl {
    using vec = typename V::vec;
    using ivec = typename V::ivec;
    static constexpr int64_t L = V::lanes;

    static float half(uint16_t h) { return _cvtsh_ss(h); }

    // ---- the formats ----

    template <class B> using fmt = qfmt<B, V::vnni>;
    template <class B> struct tag { using type = B; };

    template <class B> [[gnu::always_inline]] static ivec nibble_codes(const B* const* b) {
        const uint8_t* qs[K];
#pragma GCC unroll 2
        for (int k = 0; k < K; ++k)
            qs[k] = b[k]->qs;
        return V::nibbles(qs);
    }
    template <class B> [[gnu::always_inline]] static ivec five_bit_codes(const B* const* b) {
        const uint8_t* qh[K];
#pragma GCC unroll 2
        for (int k = 0; k < K; ++k)
            qh[k] = b[k]->qh;
        return V::ior(nibble_codes(b), V::fifth_bits(qh));
    }

    // The unsigned (or, for signed Q8_0, signed) codes of the register's blocks b[0 .. K).
    template <class B> [[gnu::always_inline]] static ivec codes(const B* const* b) {
        if constexpr (fmt<B>::bits) {
            return five_bit_codes(b);
        } else if constexpr (sizeof(b[0]->qs) == 32) {
            const void* p[K];
#pragma GCC unroll 2
            for (int k = 0; k < K; ++k)
                p[k] = b[k]->qs;
            const ivec q = V::join(p);
            return fmt<B>::offset != 0 ? V::ixor(q, V::iset8(-128)) : q;
        } else {
            return nibble_codes(b);
        }
    }

    // The offset prepare_q uses for a type; -1 for the types with a minimum.
    static int offset_of(wtype t) {
        switch (t) {
        case wtype::q4_0:
            return fmt<block_q4_0>::offset;
        case wtype::q5_0:
            return fmt<block_q5_0>::offset;
        case wtype::q8_0:
            return fmt<block_q8_0>::offset;
        default:
            return -1;
        }
    }

    // f(tag<B>{}) for the block type B of a quantized wtype.
    template <class F> static void visit(wtype t, F&& f) {
        switch (t) {
        case wtype::q4_0:
            return f(tag<block_q4_0>{});
        case wtype::q4_1:
            return f(tag<block_q4_1>{});
        case wtype::q5_0:
            return f(tag<block_q5_0>{});
        case wtype::q5_1:
            return f(tag<block_q5_1>{});
        default:
            return f(tag<block_q8_0>{});
        }
    }

    // ---- activations ----

    static float hmax(__m256 v) {
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        return _mm_cvtss_f32(m);
    }

    // As ggml's Q8_0 quantizer (d = max |x| / 127, codes x / d rounded to nearest), with d kept
    // as a float; then the group sums of the codes give each block's extra words.
    static void prepare_q(wtype type, const float* x, int64_t blocks, int64_t stride,
                          std::byte* out) {
        const int offset = offset_of(type);
        auto* qs = reinterpret_cast<int8_t*>(out);
        auto* extra = reinterpret_cast<int32_t*>(out + 32 * stride);
        auto* d = reinterpret_cast<float*>(out + 64 * stride);
        const __m256 sign = _mm256_set1_ps(-0.0f);
        for (int64_t b = 0; b < blocks; ++b) {
            __m256 v[4];
            __m256 amax = _mm256_setzero_ps();
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
                v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
                amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
            }
            const float db = hmax(amax) / 127.0f;
            const __m256 id = _mm256_set1_ps(db != 0.0f ? 1.0f / db : 0.0f);
            __m256i n[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k)
                n[k] = _mm256_cvtps_epi32(_mm256_round_ps(
                    _mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            // packs interleave 128-bit lanes; the permutation restores element order.
            const __m256i packed =
                _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
            const __m256i codes =
                _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            const __m256i groups = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_set1_epi8(1), codes), _mm256_set1_epi16(1));
            const __m256i corr = offset >= 0
                                     ? _mm256_mullo_epi32(groups, _mm256_set1_epi32(-offset))
                                     : _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(groups),
                                                                         _mm256_set1_ps(db)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * b), codes);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(extra + 8 * b), corr);
            _mm256_storeu_ps(d + 8 * b, _mm256_set1_ps(db));
        }
    }

    // ---- dot products ----

    template <class B> static const B* row(const weights& w, int64_t r) {
        return reinterpret_cast<const B*>(w.data + static_cast<std::size_t>(r) * w.stride);
    }
    static float* out_row(f32_rows_out y, int64_t t) {
        return reinterpret_cast<float*>(reinterpret_cast<std::byte*>(y.data) +
                                        static_cast<std::size_t>(t) * y.stride);
    }
    static int64_t lo(int64_t a, int64_t b) {
        return a < b ? a : b;
    }

    static constexpr int K = V::blocks;

    // The register of blocks b .. b + K of the rows w[0 .. R) times the token rows x[0 .. T)
    // (quant_acts rows of `stride` blocks), added to acc; with Full false only block b is left
    // (x's other blocks read as zero).
    template <class B, int R, int T, bool Full>
    [[gnu::always_inline]] static void dot_step(vec (&acc)[R][T], const B* const* w,
                                                const std::byte* const* x, int64_t stride,
                                                int64_t b) {
        using F = fmt<B>;
        ivec u[R];
        vec dw[R], m[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
            const B* blk[K];
            uint16_t d[K], mins[K];
#pragma GCC unroll 2
            for (int k = 0; k < K; ++k) {
                blk[k] = w[i] + (Full ? b + k : b);
                d[k] = blk[k]->d;
                if constexpr (F::min) mins[k] = blk[k]->m;
            }
            u[i] = codes<B>(blk);
            dw[i] = V::halves(d);
            if constexpr (F::min) m[i] = V::halves(mins);
        }
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) {
            // One pointer per token; the three arrays are the same distance apart in every row.
            const std::byte* p = x[j] + 32 * b;
            const void* pq = p;
            const void* pe = p + 32 * stride;
            const auto* pd = reinterpret_cast<const float*>(p + 64 * stride);
            const ivec xq = Full ? V::iload(pq) : V::iload_first(pq);
            const ivec extra = Full ? V::iload(pe) : V::iload_first(pe);
            const vec dx = Full ? V::fload(pd) : V::fload_first(pd);
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) {
                ivec sum;
                if constexpr (F::is_signed)
                    sum = V::dot_signed(u[i], xq);
                else if constexpr (F::offset != 0)
                    sum = V::dot(extra, u[i], xq);
                else
                    sum = V::dot(V::izero(), u[i], xq);
                acc[i][j] = V::fma(V::mul(dw[i], dx), V::cvt(sum), acc[i][j]);
                if constexpr (F::min) acc[i][j] = V::fma(m[i], V::as_float(extra), acc[i][j]);
            }
        }
    }

    // yt[j][col[i]] = w[i] . x[tok[j]] for R rows and T tokens, each row's blocks unpacked once
    // for all T tokens and each token's once for all R rows. With `next`, those R rows are
    // fetched into the cache at the pace these are read.
    template <class B, int R, int T>
    static void dot_tile(const B* const* w, const int64_t* col, quant_acts x, const int64_t* tok,
                         float* const* yt, int64_t blocks, const B* const* next) {
        // Consecutive prefetches at most a cache line apart.
        constexpr int64_t step = sizeof(B) * K <= 64 ? 1 : 2;
        const std::byte* xr[T];
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j)
            xr[j] = x.data + tok[j] * quant_block_bytes * x.stride;
        vec acc[R][T];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
            for (int j = 0; j < T; ++j)
                acc[i][j] = V::zero();
        int64_t b = 0;
        for (; b + K <= blocks; b += K) {
            if (next != nullptr) {
#pragma GCC unroll 8
                for (int i = 0; i < R; ++i) {
                    V::prefetch(next[i] + b);
                    if constexpr (step == 2) V::prefetch(next[i] + b + 1);
                }
            }
            dot_step<B, R, T, true>(acc, w, xr, x.stride, b);
        }
        if constexpr (K > 1) {
            if (b < blocks) dot_step<B, R, T, false>(acc, w, xr, x.stride, b);
        }
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
            for (int j = 0; j < T; ++j)
                yt[j][col[i]] = V::sum(acc[i][j]);
    }

    // dot_tile for nr <= R rows and nt <= T tokens, without prefetch.
    template <class B, int R, int T>
    static void tile(int nr, int nt, const B* const* w, const int64_t* col, quant_acts x,
                     const int64_t* tok, float* const* yt, int64_t blocks) {
        if constexpr (R > 1) {
            if (nr < R) return tile<B, R - 1, T>(nr, nt, w, col, x, tok, yt, blocks);
        }
        if constexpr (T > 1) {
            if (nt < T) return tile<B, R, T - 1>(nr, nt, w, col, x, tok, yt, blocks);
        }
        dot_tile<B, R, T>(w, col, x, tok, yt, blocks, nullptr);
    }

    // y[index(k)] = w[index(k)] . x for k in [0, n).
    template <class B, class Index>
    static void rows_times_token(const weights& w, int64_t n, Index index, quant_acts x, float* y) {
        constexpr int R = V::q_decode;
        const int64_t blocks = w.cols / qk8_0;
        const int64_t tok[1] = {0};
        float* const yt[1] = {y};
        for (int64_t k = 0; k < n; k += R) {
            const int nr = static_cast<int>(lo(R, n - k));
            const B* wr[R];
            int64_t col[R];
            for (int i = 0; i < nr; ++i) {
                col[i] = index(k + i);
                wr[i] = row<B>(w, col[i]);
            }
            if (nr == R && k + 2 * R <= n) {
                const B* next[R];
                for (int i = 0; i < R; ++i)
                    next[i] = row<B>(w, index(k + R + i));
                dot_tile<B, R, 1>(wr, col, x, tok, yt, blocks, next);
            } else {
                tile<B, R, 1>(nr, 1, wr, col, x, tok, yt, blocks);
            }
        }
    }

    static void mul_rows_q(const weights& w, const int32_t* rows, int64_t first, int64_t n,
                           quant_acts x, float* y) {
        visit(w.type, [&](auto t) {
            using B = typename decltype(t)::type;
            if (rows != nullptr)
                rows_times_token<B>(
                    w, n, [rows](int64_t k) { return static_cast<int64_t>(rows[k]); }, x, y);
            else
                rows_times_token<B>(
                    w, n, [first](int64_t k) { return first + k; }, x, y);
        });
    }

    // Rows stay in the cache while token tiles pass over them.
    template <class B>
    static void mul_mat_t(const weights& w, int64_t r0, int64_t r1, quant_acts x, int64_t n_tok,
                          f32_rows_out y) {
        constexpr int R = V::q_rows, T = V::q_tokens;
        const int64_t blocks = w.cols / qk8_0;
        for (int64_t t0 = 0; t0 < n_tok; t0 += T) {
            const int nt = static_cast<int>(lo(T, n_tok - t0));
            int64_t tok[T];
            float* yt[T];
            for (int j = 0; j < nt; ++j) {
                tok[j] = t0 + j;
                yt[j] = out_row(y, t0 + j);
            }
            for (int64_t r = r0; r < r1; r += R) {
                const int nr = static_cast<int>(lo(R, r1 - r));
                const B* wr[R];
                int64_t col[R];
                for (int i = 0; i < nr; ++i) {
                    col[i] = r + i;
                    wr[i] = row<B>(w, r + i);
                }
                tile<B, R, T>(nr, nt, wr, col, x, tok, yt, blocks);
            }
        }
    }

    static void mul_mat_q(const weights& w, int64_t r0, int64_t r1, quant_acts x, int64_t n_tok,
                          f32_rows_out y) {
        visit(w.type,
              [&](auto t) { mul_mat_t<typename decltype(t)::type>(w, r0, r1, x, n_tok, y); });
    }

    // Each row once for all its tokens, T of them per tile.
    template <class B>
    static void mul_rows_batch_t(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                                 const int32_t* tokens, quant_acts x, f32_rows_out y) {
        constexpr int T = V::q_gather;
        const int64_t blocks = w.cols / qk8_0;
        for (int64_t i = i0; i < i1; ++i) {
            const B* wr[1] = {row<B>(w, i)};
            const int64_t col[1] = {i};
            for (int64_t e = offsets[i]; e < offsets[i + 1]; e += T) {
                const int nt = static_cast<int>(lo(T, offsets[i + 1] - e));
                int64_t tok[T];
                float* yt[T];
                for (int j = 0; j < nt; ++j) {
                    tok[j] = tokens[e + j];
                    yt[j] = out_row(y, tok[j]);
                }
                tile<B, 1, T>(1, nt, wr, col, x, tok, yt, blocks);
            }
        }
    }

    static void mul_rows_batch_q(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                                 const int32_t* tokens, quant_acts x, f32_rows_out y) {
        visit(w.type, [&](auto t) {
            mul_rows_batch_t<typename decltype(t)::type>(w, i0, i1, offsets, tokens, x, y);
        });
    }

    // ---- dequantized columns, for the accumulates of simd_impl.hpp ----

    // Columns [c, c + L) of the quantized row w as floats d * q + k, with k = m, or
    // k = -offset * d (exact) so that d * (q - offset) is rounded once.
    template <class B> static vec load_cols(const B* w, int64_t c) {
        using F = fmt<B>;
        const B& blk = w[c / qk8_0];
        const int64_t e = c % qk8_0;
        ivec q;
        float k = 0.0f;
        if constexpr (sizeof(blk.qs) == 32) {
            q = V::widen_i8(blk.qs + e);
        } else {
            // Elements 0 .. 15 are the low nibbles of qs, 16 .. 31 the high ones.
            const ivec bytes = V::widen_u8(blk.qs + e % 16);
            q = e < 16 ? V::iand(bytes, V::iset32(15)) : V::srli(bytes, 4);
            if constexpr (F::bits) {
                uint32_t qh;
                __builtin_memcpy(&qh, blk.qh, sizeof(qh));
                q = V::ior(q, V::lane_bits(qh, e));
            }
            k = static_cast<float>(-F::offset) * half(blk.d);
        }
        if constexpr (F::min) k = half(blk.m);
        return V::fma(V::set1(half(blk.d)), V::cvt(q), V::set1(k));
    }
};

} // namespace pi::cpu::simd
