#pragma once
// The quantized-weight loops behind simd_kernels, written once for Q4_0, Q4_1, Q5_0, Q5_1 and
// Q8_0 over the vector type V of an instruction-set file. Templated on V so that, like
// simd_impl.hpp, every instantiation has internal linkage; no standard library calls.
//
// Products follow ggml: activations are quantized to 8-bit blocks (prepare_q) and every block
// product is exact integer arithmetic, scaled once. Weight codes are made unsigned (Q4_0 and
// Q5_0 codes as stored, Q8_0 codes + 128 with VNNI), so that one u8 x s8 instruction (vpdpbusd,
// or maddubs then madd without VNNI) gives int32 sums of four consecutive products; the offset
// times the activations' code sums, precomputed, corrects them exactly. Without VNNI, Q8_0
// codes stay signed (maddubs could saturate on codes + 128). The batched sparse products turn
// this around where they can (see liftable): activations unsigned (codes + 128), weight codes
// signed, the correction computed from the weights once per row.
//
// Two kinds of products (see simd_kernels): the dense ones (mul_mat_q) scale each block's whole
// int32 sum, the sparse ones (mul_rows_q, mul_rows_batch_q) each group of four codes. Both are
// exact up to the float work, so the VNNI and non-VNNI tables agree bit for bit.
//
// What V must provide is the concept quant_vector (simd_vector.hpp).
#include "cpu_simd.hpp"
#include "simd_hreduce.hpp"
#include "quant/blocks.hpp"
#include "simd_vector.hpp"

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

template <quant_vector V> struct quant_impl {
    using vec = typename V::vec;
    using ivec = typename V::ivec;
    static constexpr int64_t L = V::lanes;

    static float half(uint16_t h) { return _cvtsh_ss(h); }

    // ---- the formats ----

    template <class B> using fmt = qfmt<B, V::vnni>;
    template <class B> struct tag { using type = B; };

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

    // As ggml's Q8_0 quantizer (d = max |x| / 127, codes x / d rounded to nearest), with d kept
    // as a float; then the group sums of the codes give each block's group words and their total
    // its second word.
    static void prepare_q(wtype type, const float* x, int64_t blocks, int64_t stride,
                          std::byte* out) {
        const int offset = offset_of(type);
        auto* qs = reinterpret_cast<int8_t*>(out);
        auto* groups_out = reinterpret_cast<int32_t*>(out + 32 * stride);
        auto* d8 = reinterpret_cast<float*>(out + 64 * stride);
        auto* lifted = reinterpret_cast<uint8_t*>(out + 96 * stride);
        auto* words = reinterpret_cast<int32_t*>(out + 128 * stride);
        const __m256 sign = _mm256_set1_ps(-0.0f);
        for (int64_t b = 0; b < blocks; ++b) {
            __m256 v[4];
            __m256 amax = _mm256_setzero_ps();
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
                v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
                amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
            }
            const float db = hreduce<V>::max8(amax) / 127.0f;
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
            const int32_t sum = hreduce<V>::sum8(groups);
            const __m256i corr = offset >= 0
                                     ? _mm256_mullo_epi32(groups, _mm256_set1_epi32(-offset))
                                     : _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(groups),
                                                                         _mm256_set1_ps(db)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * b), codes);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(groups_out + 8 * b), corr);
            _mm256_storeu_ps(d8 + 8 * b, _mm256_set1_ps(db));
            if (offset > 0) // only the offset formats' batched sparse products read them
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(lifted + 32 * b),
                                    _mm256_xor_si256(codes, _mm256_set1_epi8(-128)));
            words[2 * b] = __builtin_bit_cast(int32_t, db);
            words[2 * b + 1] = offset >= 0
                                   ? -offset * sum
                                   : __builtin_bit_cast(int32_t, db * static_cast<float>(sum));
        }
    }

    // ---- shared by the products ----

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

    // A token's quant_acts row, and, for its block b, the codes, the group words, the eight
    // copies of d_x, the codes + 128 and the two words.
    static const std::byte* token_row(quant_acts x, int64_t t) {
        return x.data + t * quant_block_bytes * x.stride;
    }
    static const std::byte* codes_at(const std::byte* xr, int64_t b) {
        return xr + 32 * b;
    }
    static const std::byte* groups_at(const std::byte* xr, int64_t stride, int64_t b) {
        return xr + 32 * (stride + b);
    }
    static const float* d8_at(const std::byte* xr, int64_t stride, int64_t b) {
        return reinterpret_cast<const float*>(xr + 32 * (2 * stride + b));
    }
    static const std::byte* lifted_at(const std::byte* xr, int64_t stride, int64_t b) {
        return xr + 32 * (3 * stride + b);
    }
    static const float* words_at(const std::byte* xr, int64_t stride, int64_t b) {
        return reinterpret_cast<const float*>(xr + 128 * stride + 8 * b);
    }

    // The 32-bit word at p in every lane.
    static ivec bcast32(const void* p) {
        int32_t v;
        __builtin_memcpy(&v, p, sizeof(v));
        return V::iset32(v);
    }

    // A register of K blocks of activations from p, or with Full false only the first.
    template <bool Full> [[gnu::always_inline]] static ivec iload_part(const void* p) {
        if constexpr (Full)
            return V::iload(p);
        else
            return V::iload_first(p);
    }
    template <bool Full> [[gnu::always_inline]] static vec fload_part(const float* p) {
        if constexpr (Full)
            return V::fload(p);
        else
            return V::fload_first(p);
    }

    // The register's blocks b .. b + K of the N rows `next` fetched into the cache, for tiles that
    // read the next rows' blocks at the pace they read their own.
    template <class B, int N>
    [[gnu::always_inline]] static void prefetch_step(const B* const* next, int64_t b) {
        // Consecutive prefetches at most a cache line apart. The intrinsic, not V::prefetch: GCC 12
        // dropped the prefetches of this helper when they went through V.
        constexpr bool second = sizeof(B) * K > 64;
#pragma GCC unroll 8
        for (int i = 0; i < N; ++i) {
            _mm_prefetch(reinterpret_cast<const char*>(next[i] + b), _MM_HINT_T0);
            if constexpr (second)
                _mm_prefetch(reinterpret_cast<const char*>(next[i] + b + 1), _MM_HINT_T0);
        }
    }

    // The exact int32 sums acc + u . x per 32-bit lane, u the weight codes of the lane.
    template <class B> [[gnu::always_inline]] static ivec dot_codes(ivec acc, ivec u, ivec x) {
        if constexpr (fmt<B>::is_signed)
            return V::iadd(acc, V::dot_signed(u, x));
        else
            return V::dot(acc, u, x);
    }

    // ---- dense products: rows in the lanes ----
    //
    // mul_mat_q: every output is, per block in order, the block's exact int32 sum converted to
    // float, scaled by d_w * d_x and added by one FMA into one float (then, for Q4_1 and Q5_1,
    // m_w * s_x added by a second FMA). Prompt batches compute it as follows, one token as in the
    // next section.
    //
    // P = V::lanes rows share a register: the weights are transposed so that lane r of the
    // g-th register holds row r's four codes of group g, and one u8 x s8 instruction against a
    // token's broadcast group adds to every row's block sum at once. A block's sums are then
    // whole in their lanes, and a token's float work per block is one convert, one multiply and
    // one FMA for all P rows.

    static constexpr int P = static_cast<int>(V::lanes);
    // Blocks of a panel transposed at once, kept in L1 while every token passes.
    static constexpr int64_t panel_blocks = 8;

    struct panel {
        ivec w[panel_blocks][8];
        alignas(64) float d[panel_blocks][P];
        alignas(64) float m[panel_blocks][P];
    };

    // The 32 codes of one block, unsigned (or signed for signed Q8_0), in element order.
    template <class B> [[gnu::always_inline]] static __m256i block_codes(const B& blk) {
        if constexpr (sizeof(blk.qs) == 32) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
            return fmt<B>::offset != 0 ? _mm256_xor_si256(q, _mm256_set1_epi8(-128)) : q;
        } else {
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
            const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                               _mm256_set1_epi8(0x0f));
            if constexpr (fmt<B>::bits)
                return _mm256_or_si256(q, fifth_bits(blk.qh));
            else
                return q;
        }
    }

    // Byte e becomes 0x10 when bit e of the little-endian word is set: each byte of the word
    // is spread over eight bytes, which keep only their own bit.
    [[gnu::always_inline]] static __m256i fifth_bits(const uint8_t* qh) {
        uint32_t bits;
        __builtin_memcpy(&bits, qh, sizeof(bits));
        const __m256i spread =
            _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)),
                                _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                  0x0101010101010101, 0x0000000000000000));
        const __m256i set =
            _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
                              _mm256_set1_epi64x(-1));
        return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
    }

    // The final step of the transpose and of the sum of group lanes: per 128-bit lane pair,
    // the even lanes of a and b interleaved (lo), or their odd lanes (hi).
    //
    // z[a] holds V::pair_rows's rows; out[g] gets their group-g words, row r in lane r.
    [[gnu::always_inline]] static void transpose(ivec (&z)[8]) {
        ivec t[8], u[8];
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            t[2 * p] = V::unpacklo32(z[2 * p], z[2 * p + 1]);
            t[2 * p + 1] = V::unpackhi32(z[2 * p], z[2 * p + 1]);
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            u[4 * h] = V::unpacklo64(t[4 * h], t[4 * h + 2]);
            u[4 * h + 1] = V::unpackhi64(t[4 * h], t[4 * h + 2]);
            u[4 * h + 2] = V::unpacklo64(t[4 * h + 1], t[4 * h + 3]);
            u[4 * h + 3] = V::unpackhi64(t[4 * h + 1], t[4 * h + 3]);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            z[k] = V::join_lo(u[k], u[k + 4]);
            z[k + 4] = V::join_hi(u[k], u[k + 4]);
        }
    }

    // The panel of the P rows w[0 .. P) over blocks [b0, b0 + nb).
    template <class B> static void fill_panel(const B* const* w, int64_t b0, int64_t nb, panel& p) {
        for (int64_t k = 0; k < nb; ++k) {
            __m256i c[P];
#pragma GCC unroll 16
            for (int i = 0; i < P; ++i) {
                const B& blk = w[i][b0 + k];
                c[i] = block_codes(blk);
                p.d[k][i] = half(blk.d);
                if constexpr (fmt<B>::min) p.m[k][i] = half(blk.m);
            }
            ivec z[8];
            V::pair_rows(c, z);
            transpose(z);
#pragma GCC unroll 8
            for (int g = 0; g < 8; ++g)
                p.w[k][g] = z[g];
        }
    }

    // acc[j] (the P rows of token x[j]) continued over the panel's nb blocks from b0.
    template <class B, int T>
    static void panel_tokens(const panel& p, int64_t b0, int64_t nb, const std::byte* const* x,
                             int64_t stride, vec (&acc)[T]) {
        using F = fmt<B>;
        for (int64_t k = 0; k < nb; ++k) {
            const int64_t b = b0 + k;
            ivec s[T];
#pragma GCC unroll 16
            for (int j = 0; j < T; ++j) {
                if constexpr (F::offset != 0)
                    s[j] = bcast32(words_at(x[j], stride, b) + 1);
                else
                    s[j] = V::izero();
            }
#pragma GCC unroll 8
            for (int g = 0; g < 8; ++g) {
                const ivec w = p.w[k][g];
#pragma GCC unroll 16
                for (int j = 0; j < T; ++j)
                    s[j] = dot_codes<B>(s[j], w, bcast32(codes_at(x[j], b) + 4 * g));
            }
            const vec dw = V::load(p.d[k]);
#pragma GCC unroll 16
            for (int j = 0; j < T; ++j) {
                const float* sc = words_at(x[j], stride, b);
                acc[j] = V::fma(V::cvt(s[j]), V::mul(dw, V::set1(sc[0])), acc[j]);
                if constexpr (F::min) acc[j] = V::fma(V::load(p.m[k]), V::set1(sc[1]), acc[j]);
            }
        }
    }

    // The products of a panel's nr rows (from r) with T tokens from t0, over its blocks from b0,
    // continuing the sums in y unless b0 is 0.
    template <class B, int T>
    static void panel_tile(const panel& p, int64_t b0, int64_t nb, quant_acts x, int64_t t0,
                           f32_rows_out y, int64_t r, int nr) {
        const std::byte* xr[T];
        vec acc[T];
#pragma GCC unroll 16
        for (int j = 0; j < T; ++j) {
            xr[j] = token_row(x, t0 + j);
            acc[j] = b0 == 0 ? V::zero() : V::load_n(out_row(y, t0 + j) + r, nr);
        }
        panel_tokens<B, T>(p, b0, nb, xr, x.stride, acc);
#pragma GCC unroll 16
        for (int j = 0; j < T; ++j)
            V::store_n(out_row(y, t0 + j) + r, acc[j], nr);
    }

    // ---- dense products, one token: groups in the lanes, summed per block ----
    //
    // Eight rows of one token each get a register of K blocks' group sums, as the codes lie in
    // memory, started from zero; the group lanes are then summed (exactly, in int32) into one
    // lane per row and block, the block's word is added, and the float work is that of the
    // panels, eight rows at a time.

    // The sums of the group lanes of v[0 .. N) (the others zero), per block: block k's sums of
    // items 0 .. 7 in lanes 8k .. 8k + 7.
    template <int N> [[gnu::always_inline]] static ivec sum_groups(const ivec (&v)[8]) {
        ivec w[4], x[2];
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p)
            w[p] = 2 * p < N ? V::iadd(V::unpacklo32(v[2 * p], v[2 * p + 1]),
                                       V::unpackhi32(v[2 * p], v[2 * p + 1]))
                             : V::izero();
#pragma GCC unroll 2
        for (int q = 0; q < 2; ++q)
            x[q] = 4 * q < N ? V::iadd(V::unpacklo64(w[2 * q], w[2 * q + 1]),
                                       V::unpackhi64(w[2 * q], w[2 * q + 1]))
                             : V::izero();
        return V::iadd(V::join_lo(x[0], x[1]), V::join_hi(x[0], x[1]));
    }

    // Eight binary16 values as floats, assembled in registers: through memory, eight narrow
    // stores and a wide load could not forward, and would hold the load until the stores retire.
    static __m256 halves8(const uint16_t (&h)[8]) {
        auto i = [&](int k) { return static_cast<short>(h[k]); };
        return _mm256_cvtph_ps(_mm_setr_epi16(i(0), i(1), i(2), i(3), i(4), i(5), i(6), i(7)));
    }

    // Blocks b .. b + NB of the rows w[0 .. N) times the T tokens x[0 .. T) added to acc[j]: the
    // rows' codes are unpacked once for all the tokens, and each token's sums are those it gets
    // alone, so a token's bits do not depend on the batch.
    template <class B, int N, int NB, int T>
    [[gnu::always_inline]] static void rows_step(__m256 (&acc)[T], const B* const* w,
                                                 const std::byte* const* x, int64_t stride,
                                                 int64_t b) {
        using F = fmt<B>;
        // Per block, the rows' d_w (and m_w), zero beyond N.
        uint16_t dh[NB][8] = {}, mh[NB][8] = {};
        ivec u[8];
#pragma GCC unroll 8
        for (int i = 0; i < N; ++i) {
            const B* blk[K];
#pragma GCC unroll 2
            for (int k = 0; k < K; ++k)
                blk[k] = w[i] + (NB == K ? b + k : b);
            u[i] = codes<B>(blk);
#pragma GCC unroll 2
            for (int k = 0; k < NB; ++k) {
                dh[k][i] = blk[k]->d;
                if constexpr (F::min) mh[k][i] = blk[k]->m;
            }
        }
        __m256 dw[NB], mw[NB];
#pragma GCC unroll 2
        for (int k = 0; k < NB; ++k) {
            dw[k] = halves8(dh[k]);
            if constexpr (F::min) mw[k] = halves8(mh[k]);
        }
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) {
            const void* pq = codes_at(x[j], b);
            ivec xq;
            if constexpr (NB == K)
                xq = V::iload(pq);
            else
                xq = V::iload_first(pq);
            ivec v[8];
#pragma GCC unroll 8
            for (int i = 0; i < N; ++i)
                v[i] = dot_codes<B>(V::izero(), u[i], xq);
#pragma GCC unroll 8
            for (int i = N; i < 8; ++i)
                v[i] = V::izero();
            ivec sums = sum_groups<N>(v);
            if constexpr (F::offset != 0) {
                __m256i corr[K] = {};
#pragma GCC unroll 2
                for (int k = 0; k < NB; ++k)
                    corr[k] = _mm256_set1_epi32(
                        __builtin_bit_cast(int32_t, words_at(x[j], stride, b + k)[1]));
                sums = V::iadd(sums, V::from_halves(corr));
            }
            const vec f = V::cvt(sums);
#pragma GCC unroll 2
            for (int k = 0; k < NB; ++k) {
                const float* words = words_at(x[j], stride, b + k);
                acc[j] = _mm256_fmadd_ps(V::half_of(f, k),
                                         _mm256_mul_ps(dw[k], _mm256_set1_ps(words[0])), acc[j]);
                if constexpr (F::min)
                    acc[j] = _mm256_fmadd_ps(mw[k], _mm256_set1_ps(words[1]), acc[j]);
            }
        }
    }

    // y[j][i] = w[i] . x[j] for the N rows w and T tokens x. With `next`, the rows of the next
    // call are fetched into the cache at the pace these are read.
    template <class B, int N, int T>
    static void rows_tile(const B* const* w, const std::byte* const* x, int64_t stride,
                          int64_t blocks, float* const* y, const B* const* next) {
        __m256 acc[T];
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j)
            acc[j] = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + K <= blocks; b += K) {
            if (next != nullptr) prefetch_step<B, N>(next, b);
            rows_step<B, N, K, T>(acc, w, x, stride, b);
        }
        if constexpr (K > 1) {
            if (b < blocks) rows_step<B, N, 1, T>(acc, w, x, stride, b);
        }
        for (int j = 0; j < T; ++j) {
            alignas(32) float all[8];
            _mm256_store_ps(all, acc[j]);
            for (int i = 0; i < N; ++i)
                y[j][i] = all[i];
        }
    }

    // rows_tile for n <= N rows, without prefetch.
    template <class B, int T, int N = 8>
    static void rows_any(int n, const B* const* w, const std::byte* const* x, int64_t stride,
                         int64_t blocks, float* const* y) {
        if constexpr (N > 1) {
            if (n < N) return rows_any<B, T, N - 1>(n, w, x, stride, blocks, y);
        }
        rows_tile<B, N, T>(w, x, stride, blocks, y, nullptr);
    }

    // y[t][r] = w[r] . x[t] for r in [r0, r1) and the T tokens from t0.
    template <class B, int T>
    static void range_times_tokens(const weights& w, int64_t r0, int64_t r1, quant_acts x,
                                   int64_t t0, f32_rows_out y) {
        constexpr int R = 8;
        const int64_t blocks = w.cols / qk8_0;
        const std::byte* xr[T];
        for (int j = 0; j < T; ++j)
            xr[j] = token_row(x, t0 + j);
        for (int64_t r = r0; r < r1; r += R) {
            const int nr = static_cast<int>(lo(R, r1 - r));
            const B* wr[R];
            for (int i = 0; i < nr; ++i)
                wr[i] = row<B>(w, r + i);
            float* out[T];
            for (int j = 0; j < T; ++j)
                out[j] = out_row(y, t0 + j) + r;
            if (nr == R && r + 2 * R <= r1) {
                const B* next[R];
                for (int i = 0; i < R; ++i)
                    next[i] = row<B>(w, r + R + i);
                rows_tile<B, R, T>(wr, xr, x.stride, blocks, out, next);
            } else {
                rows_any<B, T>(nr, wr, xr, x.stride, blocks, out);
            }
        }
    }

    // Batches up to this many tokens take the rows kernel, each weight register unpacked once
    // for all of them, instead of transposing panels.
    static constexpr int64_t few_tokens = 4;

    template <class B>
    static void mul_mat_t(const weights& w, int64_t r0, int64_t r1, quant_acts x, int64_t n_tok,
                          f32_rows_out y) {
        if (n_tok <= few_tokens) {
            int64_t t = 0;
            for (; t + 4 <= n_tok; t += 4)
                range_times_tokens<B, 4>(w, r0, r1, x, t, y);
            if (t + 2 <= n_tok) {
                range_times_tokens<B, 2>(w, r0, r1, x, t, y);
                t += 2;
            }
            if (t < n_tok) range_times_tokens<B, 1>(w, r0, r1, x, t, y);
            return;
        }
        constexpr int T = V::q_tokens;
        const int64_t blocks = w.cols / qk8_0;
        panel p;
        for (int64_t r = r0; r < r1; r += P) {
            const int nr = static_cast<int>(lo(P, r1 - r));
            // A last panel repeats its last row in the lanes it does not store.
            const B* wr[P];
            for (int i = 0; i < P; ++i)
                wr[i] = row<B>(w, r + lo(i, nr - 1));
            for (int64_t b0 = 0; b0 < blocks; b0 += panel_blocks) {
                const int64_t nb = lo(panel_blocks, blocks - b0);
                fill_panel(wr, b0, nb, p);
                int64_t t = 0;
                for (; t + T <= n_tok; t += T)
                    panel_tile<B, T>(p, b0, nb, x, t, y, r, nr);
                if constexpr (T > 4) {
                    for (; t + 4 <= n_tok; t += 4)
                        panel_tile<B, 4>(p, b0, nb, x, t, y, r, nr);
                }
                if (t + 2 <= n_tok) {
                    panel_tile<B, 2>(p, b0, nb, x, t, y, r, nr);
                    t += 2;
                }
                if (t < n_tok) panel_tile<B, 1>(p, b0, nb, x, t, y, r, nr);
            }
        }
    }

    static void mul_mat_q(const weights& w, int64_t r0, int64_t r1, quant_acts x, int64_t n_tok,
                          f32_rows_out y) {
        visit(w.type,
              [&](auto t) { mul_mat_t<typename decltype(t)::type>(w, r0, r1, x, n_tok, y); });
    }

    // The codes of the register's blocks b[0 .. K), as they lie in memory.
    template <class B> [[gnu::always_inline]] static ivec codes(const B* const* b) {
        if constexpr (K == 1) {
            return block_codes(*b[0]);
        } else if constexpr (sizeof(b[0]->qs) == 32) {
            const void* p[K];
#pragma GCC unroll 2
            for (int k = 0; k < K; ++k)
                p[k] = b[k]->qs;
            const ivec q = V::join(p);
            return fmt<B>::offset != 0 ? V::ixor(q, V::iset8(-128)) : q;
        } else {
            const uint8_t* qs[K];
#pragma GCC unroll 2
            for (int k = 0; k < K; ++k)
                qs[k] = b[k]->qs;
            const ivec q = V::nibbles(qs);
            if constexpr (fmt<B>::bits) {
                const uint8_t* qh[K];
#pragma GCC unroll 2
                for (int k = 0; k < K; ++k)
                    qh[k] = b[k]->qh;
                return V::ior(q, V::fifth_bits(qh));
            } else {
                return q;
            }
        }
    }

    // ---- sparse products: groups in the lanes ----
    //
    // mul_rows_q and mul_rows_batch_q: a register holds K consecutive blocks of one (row, token)
    // product, eight group lanes each, as the codes lie in memory. Per block the eight int32
    // group sums (the group words of quant_acts start them) are converted to float, scaled by
    // d_w * d_x and added by one FMA into eight float lanes (then, for Q4_1 and Q5_1, m_w times
    // the group's float word added by a second FMA); with two blocks per register (AVX-512),
    // even and odd blocks have their own lanes. The lanes are summed in a fixed order at the end.
    //
    // A row times several tokens (mul_rows_batch_q) reads each token's activations once per
    // row, from L2, and those reads bound it. So where the weights have an offset o and u8 x s8
    // products cannot saturate (Q4_0, Q5_0; Q8_0 with VNNI), the batch kernel reads one array
    // less: it multiplies the lifted codes x + 128 (unsigned) by the signed weight codes u - o and
    // starts each group sum at -128 * (the group's sum of u - o), once per row for all tokens.
    // That is the same exact int32 sum as the decode kernel's, so the bits agree.
    template <class B> static constexpr bool liftable = fmt<B>::offset != 0 && !fmt<B>::is_signed;

    // The register of blocks b .. b + K of the rows w[0 .. R) times the token rows x[0 .. T),
    // added to acc; with Full false only block b is left (x's other blocks read as zero). Lifted:
    // the products above on the lifted codes.
    template <class B, int R, int T, bool Full, bool Lifted>
    [[gnu::always_inline]] static void group_step(vec (&acc)[R][T], const B* const* w,
                                                  const std::byte* const* x, int64_t stride,
                                                  int64_t b) {
        using F = fmt<B>;
        static_assert(!Lifted || liftable<B>);
        ivec u[R], start[R];
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
            if constexpr (Lifted) {
                // -128 * sum(u - o) per group of four codes = 512 * o - 128 * sum(u).
                start[i] = V::dot(V::iset32(512 * F::offset), u[i], V::iset8(-128));
                if constexpr (!Full) start[i] = V::ifirst(start[i]);
                u[i] = V::isub8(u[i], V::iset8(static_cast<int8_t>(F::offset)));
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) {
            const vec dx = fload_part<Full>(d8_at(x[j], stride, b));
            if constexpr (Lifted) {
                const ivec xl = iload_part<Full>(lifted_at(x[j], stride, b));
#pragma GCC unroll 8
                for (int i = 0; i < R; ++i)
                    acc[i][j] =
                        V::fma(V::mul(dw[i], dx), V::cvt(V::dot(start[i], xl, u[i])), acc[i][j]);
            } else {
                const ivec xq = iload_part<Full>(codes_at(x[j], b));
                const ivec extra = iload_part<Full>(groups_at(x[j], stride, b));
#pragma GCC unroll 8
                for (int i = 0; i < R; ++i) {
                    const ivec sum = dot_codes<B>(F::offset != 0 ? extra : V::izero(), u[i], xq);
                    acc[i][j] = V::fma(V::mul(dw[i], dx), V::cvt(sum), acc[i][j]);
                    if constexpr (F::min) acc[i][j] = V::fma(m[i], V::as_float(extra), acc[i][j]);
                }
            }
        }
    }

    // *out[i * ld + j] = w[i] . x[tok[j]] for R rows and T tokens, each row's blocks unpacked
    // once for all T tokens and each token's once for all R rows. With `next`, those R rows are
    // fetched into the cache at the pace these are read.
    template <class B, int R, int T, bool Lifted>
    static void group_tile(const B* const* w, quant_acts x, const int64_t* tok, float* const* out,
                           int ld, int64_t blocks, const B* const* next) {
        const std::byte* xr[T];
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j)
            xr[j] = token_row(x, tok[j]);
        vec acc[R][T];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
            for (int j = 0; j < T; ++j)
                acc[i][j] = V::zero();
        int64_t b = 0;
        for (; b + K <= blocks; b += K) {
            if (next != nullptr) prefetch_step<B, R>(next, b);
            group_step<B, R, T, true, Lifted>(acc, w, xr, x.stride, b);
        }
        if constexpr (K > 1) {
            if (b < blocks) group_step<B, R, T, false, Lifted>(acc, w, xr, x.stride, b);
        }
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
            for (int j = 0; j < T; ++j)
                *out[i * ld + j] = V::sum(acc[i][j]);
    }

    // group_tile for nr <= R rows and nt <= T tokens, without prefetch.
    template <class B, int R, int T, bool Lifted>
    static void group_any(int nr, int nt, const B* const* w, quant_acts x, const int64_t* tok,
                          float* const* out, int ld, int64_t blocks) {
        if constexpr (R > 1) {
            if (nr < R) return group_any<B, R - 1, T, Lifted>(nr, nt, w, x, tok, out, ld, blocks);
        }
        if constexpr (T > 1) {
            if (nt < T) return group_any<B, R, T - 1, Lifted>(nr, nt, w, x, tok, out, ld, blocks);
        }
        group_tile<B, R, T, Lifted>(w, x, tok, out, ld, blocks, nullptr);
    }

    // y[rows[k]] = w[rows[k]] . x for k in [0, n).
    template <class B>
    static void rows_times_token(const weights& w, const int32_t* rows, int64_t n, quant_acts x,
                                 float* y) {
        constexpr int R = V::q_decode;
        const int64_t blocks = w.cols / qk8_0;
        const int64_t tok[1] = {0};
        for (int64_t k = 0; k < n; k += R) {
            const int nr = static_cast<int>(lo(R, n - k));
            const B* wr[R];
            float* out[R];
            for (int i = 0; i < nr; ++i) {
                wr[i] = row<B>(w, rows[k + i]);
                out[i] = y + rows[k + i];
            }
            if (nr == R && k + 2 * R <= n) {
                const B* next[R];
                for (int i = 0; i < R; ++i)
                    next[i] = row<B>(w, rows[k + R + i]);
                group_tile<B, R, 1, false>(wr, x, tok, out, 1, blocks, next);
            } else {
                group_any<B, R, 1, false>(nr, 1, wr, x, tok, out, 1, blocks);
            }
        }
    }

    static void mul_rows_q(const weights& w, const int32_t* rows, int64_t n, quant_acts x,
                           float* y) {
        visit(w.type,
              [&](auto t) { rows_times_token<typename decltype(t)::type>(w, rows, n, x, y); });
    }

    // Row i of each of the M matrices once for all the row's tokens, T of them per tile, on the
    // lifted codes where it can: the M rows share each token's activations as they are read.
    template <class B, int M>
    static void mul_rows_batch_t(const weights* w, int64_t i0, int64_t i1, const int32_t* offsets,
                                 const int32_t* tokens, quant_acts x, const f32_rows_out* y) {
        constexpr int T = V::q_gather;
        const int64_t blocks = w[0].cols / qk8_0;
        for (int64_t i = i0; i < i1; ++i) {
            const B* wr[M];
#pragma GCC unroll 2
            for (int m = 0; m < M; ++m)
                wr[m] = row<B>(w[m], i);
            for (int64_t e = offsets[i]; e < offsets[i + 1]; e += T) {
                const int nt = static_cast<int>(lo(T, offsets[i + 1] - e));
                int64_t tok[T];
                float* out[M * T];
                for (int j = 0; j < nt; ++j) {
                    tok[j] = tokens[e + j];
#pragma GCC unroll 2
                    for (int m = 0; m < M; ++m)
                        out[m * T + j] = out_row(y[m], tok[j]) + i;
                }
                group_any<B, M, T, liftable<B>>(M, nt, wr, x, tok, out, T, blocks);
            }
        }
    }

    static void mul_rows_batch_q(const weights* w, int n_mat, int64_t i0, int64_t i1,
                                 const int32_t* offsets, const int32_t* tokens, quant_acts x,
                                 const f32_rows_out* y) {
        visit(w[0].type, [&](auto t) {
            using B = typename decltype(t)::type;
            if (n_mat == 2)
                mul_rows_batch_t<B, 2>(w, i0, i1, offsets, tokens, x, y);
            else
                mul_rows_batch_t<B, 1>(w, i0, i1, offsets, tokens, x, y);
        });
    }

    // ---- dequantized blocks, for the accumulates of simd_impl.hpp ----

    // Formats whose values are d * (q - o), without a minimum. Their accumulates add
    // (a * d) * (q - o), with a * d rounded once per block, to scale each code by one product:
    // the codes then convert without the block's scale (see block_codes and scaled_d).
    template <class B> static constexpr bool symmetric = !fmt<B>::min;
    // o: the offset of the stored codes (Q8_0's are signed already).
    template <class B>
    static constexpr int code_offset = sizeof(B::qs) == qk8_0 ? 0 : fmt<B>::offset;

    // The 32 codes of a 4- or 5-bit block as integers, L per register: elements 0 .. 15 are the
    // low nibbles of qs, 16 .. 31 the high ones, and bit e of qh is element e's fifth bit.
    template <class B> static void block_ints(const B& blk, ivec (&q)[qk8_0 / L]) {
        constexpr int U = static_cast<int>(qk8_0 / L);
        uint32_t qh = 0;
        if constexpr (fmt<B>::bits) __builtin_memcpy(&qh, blk.qh, sizeof(qh));
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) {
            const int e = u * static_cast<int>(L);
            const ivec bytes = V::widen_u8(blk.qs + e % 16);
            q[u] = e < 16 ? V::iand(bytes, V::iset32(15)) : V::srli(bytes, 4);
            if constexpr (fmt<B>::bits) q[u] = V::ior(q[u], V::lane_bits(qh, e));
        }
    }

    // Where V can index a 16-float table by the low four bits of each lane, a 4-bit block's
    // values are looked up: out[0] from the low nibbles, out[1] from the high ones.
    template <class B> static void lookup_nibbles(const B& blk, vec table, vec (&out)[qk8_0 / L]) {
        const ivec bytes = V::widen_u8(blk.qs);
        out[0] = V::lookup16(table, bytes);
        out[1] = V::lookup16(table, V::srli(bytes, 4));
    }

    // The block's 32 codes minus their offset, exact as floats, L per register; a symmetric
    // format's only.
    template <class B> static void block_codes(const B& blk, vec (&out)[qk8_0 / L]) {
        constexpr int U = static_cast<int>(qk8_0 / L);
        constexpr auto o = static_cast<float>(code_offset<B>);
        if constexpr (sizeof(blk.qs) == qk8_0) {
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u)
                out[u] = V::cvt(V::widen_i8(blk.qs + u * L));
        } else if constexpr (V::table16 && !fmt<B>::bits) {
            lookup_nibbles(blk, V::sub(V::iota(), V::set1(o)), out);
        } else {
            ivec q[U];
            block_ints(blk, q);
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u)
                out[u] = V::sub(V::cvt(q[u]), V::set1(o));
        }
    }

    // out[j] = a * d of block j, j < n <= 4, each rounded once: four scales in one conversion.
    template <class B> static void scaled_d(const B* blk, int n, float a, float* out) {
        uint64_t h = 0;
        for (int j = 0; j < n; ++j)
            h |= static_cast<uint64_t>(blk[j].d) << (16 * j);
        const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
        _mm_storeu_ps(out, _mm_mul_ps(d, _mm_set1_ps(a)));
        // Each block broadcasts its product straight from memory, a load; from the register
        // the compiler would keep, every lane would cost a shuffle on the port that the code
        // lookups already keep busy.
        __asm__("" : "+m"(*reinterpret_cast<float(*)[4]>(out)));
    }

    // The values d * q + m of a block of a format with a minimum (Q4_1, Q5_1) as floats, L per
    // register. A 4-bit block computes its 16 possible values once (the same fma, so the same
    // bits) and looks its codes up where V can.
    template <class B> static void block_floats(const B& blk, vec (&out)[qk8_0 / L]) {
        static_assert(fmt<B>::min);
        constexpr int U = static_cast<int>(qk8_0 / L);
        const vec d = V::set1(half(blk.d)), m = V::set1(half(blk.m));
        if constexpr (V::table16 && !fmt<B>::bits) {
            lookup_nibbles(blk, V::fma(d, V::iota(), m), out);
        } else {
            ivec q[U];
            block_ints(blk, q);
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u)
                out[u] = V::fma(d, V::cvt(q[u]), m);
        }
    }
};

} // namespace pi::cpu::simd
