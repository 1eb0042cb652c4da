#pragma once
// The K-quant loops behind simd_kernels: Q4_K and Q6_K weights (super-blocks of qk_k = 256
// elements, docs/quantization.md). Templated on V like simd_quant_impl.hpp, so that every
// instantiation has internal linkage; no standard library calls.
//
// Products (mul_rows_k, mul_mat_k, mul_rows_batch_k) follow ggml's Q4_K x Q8_K and Q6_K x Q8_K:
// the activations are quantized once per call to Q8_K rows (prepare_k: one float scale per 256,
// codes in [-127, 127], and the sums of each 16 codes), and each super-block's product is exact
// integer arithmetic: maddubs (u8 codes x s8 activations, no saturation: |q| <= 63) then madd by
// the sub-block scales gives int32 sums, converted and scaled by d_w * d_x with one FMA per
// super-block; the minimum (Q4_K) and the offset 32 (Q6_K) come from the activations' 16-sums,
// also exactly. These loops use 256-bit registers on every level: a super-block's 32-element
// sub-blocks fill one register, and the products are bound by memory long before the integer
// units (about 12 bytes of weights per cycle per core against 4 that memory delivers).
//
// Every output of a product is the same float sequence per super-block whatever the entry, the
// tile or the batch, so sparse and dense products, a token alone and inside a batch, and any
// thread count give the same bits.
//
// The accumulate (axpy_rows_k, the ffn_down_t product of the sparse FFN) keeps the activations
// as floats: y += a * w for each listed row, with w's values d * sc * q - dmin * m converted per
// V::lanes columns. Each row adds a * d * sc (rounded once per sub-block) times its codes by one
// FMA per element, and for Q4_K a * dmin * m to a per-sub-block sum subtracted at the end. It
// uses V's full width (16 floats with AVX-512): converting codes is its cost.
#include "cpu_simd.hpp"
#include "simd_hreduce.hpp"
#include "quant/blocks.hpp"
#include "simd_vector.hpp"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace pi::cpu::simd {

template <quant_vector V> struct kquant_impl {
    using vec = typename V::vec;
    using ivec = typename V::ivec;
    static constexpr int64_t L = V::lanes;

    static float half(uint16_t h) { return _cvtsh_ss(h); }
    static int64_t lo(int64_t a, int64_t b) { return a < b ? a : b; }

    // ---- activations ----

    // Q8_K rows: d = max |x| / 127 over the 256 elements, codes x / d rounded to nearest (as
    // prepare_q does per 32), and the sums of each 16 codes.
    static void prepare_k(const float* x, int64_t blocks, block_q8_k* out) {
        const __m256 sign = _mm256_set1_ps(-0.0f);
        for (int64_t b = 0; b < blocks; ++b) {
            const float* xb = x + qk_k * b;
            __m256 amax = _mm256_setzero_ps();
            for (int k = 0; k < qk_k / 8; ++k)
                amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * k)));
            const float d = hreduce<V>::max8(amax) / 127.0f;
            const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
            block_q8_k& q = out[b];
            q.d = d;
            for (int k = 0; k < qk_k / 32; ++k) {
                __m256i n[4];
#pragma GCC unroll 4
                for (int u = 0; u < 4; ++u)
                    n[u] = _mm256_cvtps_epi32(
                        _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * k + 8 * u), id),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                // packs interleave 128-bit lanes; the permutation restores element order.
                const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]),
                                                          _mm256_packs_epi32(n[2], n[3]));
                const __m256i codes =
                    _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.qs + 32 * k), codes);
                // Sums of 4 codes per int32 lane; lanes 0-3 and 4-7 make the two 16-sums.
                const __m256i s4 = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_set1_epi8(1), codes), _mm256_set1_epi16(1));
                alignas(32) int32_t s[8];
                _mm256_store_si256(reinterpret_cast<__m256i*>(s), s4);
                q.bsums[2 * k] = static_cast<int16_t>(s[0] + s[1] + s[2] + s[3]);
                q.bsums[2 * k + 1] = static_cast<int16_t>(s[4] + s[5] + s[6] + s[7]);
            }
        }
    }

    // ---- the weights' super-blocks, unpacked once for all the tokens of a tile ----

    // The codes of 32 consecutive elements per register (u8), the int16 scale of each element
    // pair's sub-block (madd's multiplier), and the super-block's float scales.
    struct unpacked {
        __m256i q[8];
        __m256i sc[8];
        __m128i mins;    // Q4_K: the eight six-bit minima as int16
        __m256i scales;  // Q6_K: the sixteen scales as int16
        float d, dmin;
    };

    // A 16-bit element of a register's 128-bit lanes broadcast: element lo_elem to the low lane,
    // hi_elem to the high one (pshufb control).
    static __m256i pick16(int lo_elem, int hi_elem) {
        const auto ctl = [](int e) { return static_cast<int16_t>((2 * e + 1) << 8 | 2 * e); };
        return _mm256_set_m128i(_mm_set1_epi16(ctl(hi_elem)), _mm_set1_epi16(ctl(lo_elem)));
    }

    // Q4_K's twelve scale bytes as eight scales (bytes 0-7 of out) and eight minima (8-15).
    static void q4k_scales(const uint8_t* s, uint32_t (&out)[4]) {
        uint32_t w[3];
        __builtin_memcpy(w, s, sizeof(w));
        out[0] = w[0] & 0x3f3f3f3fu;
        out[1] = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 6) & 0x03030303u) << 4;
        out[2] = w[1] & 0x3f3f3f3fu;
        out[3] = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 6) & 0x03030303u) << 4;
    }

    // Register s holds sub-block s (elements 32s .. 32s + 31): the low nibbles of qs[32g ..] for
    // s = 2g, the high ones for s = 2g + 1.
    [[gnu::always_inline]] static void unpack(const block_q4_k& b, unpacked& u) {
        uint32_t s[4];
        q4k_scales(b.scales, s);
        const __m256i sc16 = _mm256_broadcastsi128_si256(
            _mm_cvtepu8_epi16(_mm_setr_epi32(static_cast<int32_t>(s[0]), static_cast<int32_t>(s[1]),
                                             0, 0)));
        u.mins = _mm_cvtepu8_epi16(
            _mm_setr_epi32(static_cast<int32_t>(s[2]), static_cast<int32_t>(s[3]), 0, 0));
        const __m256i m4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * g));
            u.q[2 * g] = _mm256_and_si256(raw, m4);
            u.q[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
            u.sc[k] = _mm256_shuffle_epi8(sc16, pick16(k, k));
        u.d = half(b.d);
        u.dmin = half(b.dmin);
    }

    // Register 4h + k holds quarter k of half h (elements 128h + 32k ..), sub-blocks 8h + 2k (low
    // 128-bit lane) and 8h + 2k + 1 (high): four bits from ql, two from qh.
    [[gnu::always_inline]] static void unpack(const block_q6_k& b, unpacked& u) {
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        u.scales = _mm256_cvtepi8_epi16(sc8);
        const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const auto* ql = reinterpret_cast<const __m256i*>(b.ql + 64 * h);
            const __m256i l0 = _mm256_loadu_si256(ql), l1 = _mm256_loadu_si256(ql + 1);
            const __m256i qh =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
            u.q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                         _mm256_and_si256(_mm256_slli_epi16(qh, 4), m3));
            u.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), m3));
            u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                             _mm256_and_si256(qh, m3));
            u.q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m3));
            const __m256i half_sc = _mm256_broadcastsi128_si256(
                h == 0 ? _mm256_castsi256_si128(u.scales) : _mm256_extracti128_si256(u.scales, 1));
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k)
                u.sc[4 * h + k] = _mm256_shuffle_epi8(half_sc, pick16(2 * k, 2 * k + 1));
        }
        u.d = half(b.d);
    }

    // Σ sc * q * x over the super-block, exact, in eight int32 lanes.
    [[gnu::always_inline]] static __m256i scaled_sums(const unpacked& u, const block_q8_k& x) {
        __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * r));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u.q[r], xq), u.sc[r]));
        }
        return sum;
    }

    // One token's running sums: acc the scaled products, accm (Q4_K) the minimum terms.
    struct token_sums {
        __m256 acc;
        __m128 accm;
    };

    [[gnu::always_inline]] static void add_block(const block_q4_k*, const unpacked& u,
                                                 const block_q8_k& x, token_sums& s) {
        const __m256i sum = scaled_sums(u, x);
        s.acc = _mm256_fmadd_ps(_mm256_set1_ps(u.d * x.d), _mm256_cvtepi32_ps(sum), s.acc);
        // Σ m_s * (the two 16-sums of sub-block s), in four int32 lanes.
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
        const __m128i pairs =
            _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        s.accm = _mm_fmadd_ps(_mm_set1_ps(u.dmin * x.d),
                              _mm_cvtepi32_ps(_mm_madd_epi16(u.mins, pairs)), s.accm);
    }

    [[gnu::always_inline]] static void add_block(const block_q6_k*, const unpacked& u,
                                                 const block_q8_k& x, token_sums& s) {
        __m256i sum = scaled_sums(u, x);
        // The codes are q + 32: subtract 32 * Σ sc_s * (16-sum s).
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
        sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(_mm256_madd_epi16(u.scales, bs), 5));
        s.acc = _mm256_fmadd_ps(_mm256_set1_ps(u.d * x.d), _mm256_cvtepi32_ps(sum), s.acc);
    }

    static float finish(const block_q4_k*, const token_sums& s) {
        return hreduce<V>::sum8(s.acc) - hreduce<V>::sum4(s.accm);
    }
    static float finish(const block_q6_k*, const token_sums& s) { return hreduce<V>::sum8(s.acc); }

    // Bytes of a super-block the prefetches cover: every cache line it may touch.
    template <class B> static void prefetch_block(const B* b) {
        const auto* p = reinterpret_cast<const char*>(b);
        for (std::size_t o = 0; o < sizeof(B); o += 64)
            _mm_prefetch(p + o, _MM_HINT_T0);
        _mm_prefetch(p + sizeof(B) - 1, _MM_HINT_T0);
    }

    // *out[j] = w . x[j] for T tokens over `blocks` super-blocks; the row `next` is fetched into
    // the cache at the pace w is read.
    template <class B, int T>
    static void dot_tile(const B* w, const block_q8_k* const* x, int64_t blocks, float* const* out,
                         const B* next) {
        token_sums s[T];
#pragma GCC unroll 4
        for (int j = 0; j < T; ++j)
            s[j] = {_mm256_setzero_ps(), _mm_setzero_ps()};
        for (int64_t b = 0; b < blocks; ++b) {
            if (next != nullptr) prefetch_block(next + b);
            unpacked u;
            unpack(w[b], u);
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j)
                add_block(w, u, x[j][b], s[j]);
        }
#pragma GCC unroll 4
        for (int j = 0; j < T; ++j)
            *out[j] = finish(w, s[j]);
    }

    // Tokens per tile: each weight super-block is unpacked once for this many.
    static constexpr int tile_tokens = 4;

    template <class B>
    static void dot_any(int nt, const B* w, const block_q8_k* const* x, int64_t blocks,
                        float* const* out, const B* next) {
        switch (nt) {
        case 4:
            return dot_tile<B, 4>(w, x, blocks, out, next);
        case 3:
            return dot_tile<B, 3>(w, x, blocks, out, next);
        case 2:
            return dot_tile<B, 2>(w, x, blocks, out, next);
        default:
            return dot_tile<B, 1>(w, x, blocks, out, next);
        }
    }

    template <class B> static const B* row(const weights& w, int64_t r) {
        return reinterpret_cast<const B*>(w.data + static_cast<std::size_t>(r) * w.stride);
    }
    static float* out_row(f32_rows_out y, int64_t t) {
        return reinterpret_cast<float*>(reinterpret_cast<std::byte*>(y.data) +
                                        static_cast<std::size_t>(t) * y.stride);
    }

    template <class F> static void visit(wtype t, F&& f) {
        if (t == wtype::q6_k)
            f(static_cast<const block_q6_k*>(nullptr));
        else
            f(static_cast<const block_q4_k*>(nullptr));
    }

    // *out[i] = w[i] . x for N rows and one token, their super-blocks read side by side: listed
    // rows are scattered, and N streams keep N times the memory accesses in flight. The rows
    // `next` are fetched into the cache at the pace these are read. Each row's sums are those of
    // dot_tile, in the same order.
    template <class B, int N>
    static void dot_rows(const B* const* w, const block_q8_k* x, int64_t blocks, float* const* out,
                         const B* const* next) {
        token_sums s[N];
#pragma GCC unroll 4
        for (int i = 0; i < N; ++i)
            s[i] = {_mm256_setzero_ps(), _mm_setzero_ps()};
        for (int64_t b = 0; b < blocks; ++b) {
#pragma GCC unroll 4
            for (int i = 0; i < N; ++i) {
                if (next != nullptr) prefetch_block(next[i] + b);
                unpacked u;
                unpack(w[i][b], u);
                add_block(w[i], u, x[b], s[i]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < N; ++i)
            *out[i] = finish(w[i], s[i]);
    }

    static constexpr int sparse_rows = 4;

    // y[rows[k]] = w[rows[k]] . x for k in [0, n), sparse_rows listed rows at a time.
    static void mul_rows_k(const weights& w, const int32_t* rows, int64_t n, const block_q8_k* x,
                           float* y) {
        visit(w.type, [&]<class B>(const B*) {
            constexpr int N = sparse_rows;
            const int64_t blocks = w.cols / qk_k;
            int64_t k = 0;
            for (; k + N <= n; k += N) {
                const B* wr[N];
                const B* next[N];
                float* out[N];
                const bool more = k + 2 * N <= n;
                for (int i = 0; i < N; ++i) {
                    wr[i] = row<B>(w, rows[k + i]);
                    next[i] = more ? row<B>(w, rows[k + N + i]) : nullptr;
                    out[i] = y + rows[k + i];
                }
                dot_rows<B, N>(wr, x, blocks, out, more ? next : nullptr);
            }
            for (; k < n; ++k) {
                float* out = y + rows[k];
                dot_tile<B, 1>(row<B>(w, rows[k]), &x, blocks, &out,
                               k + 1 < n ? row<B>(w, rows[k + 1]) : nullptr);
            }
        });
    }

    // y[t][r] = w[r] . x[t] for rows [r0, r1) and tokens [0, n_tok): tiles of tokens outside,
    // so that a task's rows stay in L2 while every tile passes and a tile's activations in L1.
    static void mul_mat_k(const weights& w, int64_t r0, int64_t r1, k_acts x, int64_t n_tok,
                          f32_rows_out y) {
        visit(w.type, [&]<class B>(const B*) {
            const int64_t blocks = w.cols / qk_k;
            for (int64_t t = 0; t < n_tok; t += tile_tokens) {
                const int nt = static_cast<int>(lo(tile_tokens, n_tok - t));
                const block_q8_k* xs[tile_tokens];
                for (int j = 0; j < nt; ++j)
                    xs[j] = x.data + (t + j) * x.stride;
                for (int64_t r = r0; r < r1; ++r) {
                    float* out[tile_tokens];
                    for (int j = 0; j < nt; ++j)
                        out[j] = out_row(y, t + j) + r;
                    dot_any<B>(nt, row<B>(w, r), xs, blocks, out,
                               r + 1 < r1 ? row<B>(w, r + 1) : nullptr);
                }
            }
        });
    }

    // For each row i in [i0, i1) of each of the n_mat matrices w[m], and each token t in
    // tokens[offsets[i] .. offsets[i + 1]): y[m][t][i] = w[m][i] . x[t].
    static void mul_rows_batch_k(const weights* w, int n_mat, int64_t i0, int64_t i1,
                                 const int32_t* offsets, const int32_t* tokens, k_acts x,
                                 const f32_rows_out* y) {
        visit(w[0].type, [&]<class B>(const B*) {
            const int64_t blocks = w[0].cols / qk_k;
            for (int64_t i = i0; i < i1; ++i)
                for (int m = 0; m < n_mat; ++m)
                    for (int64_t e = offsets[i]; e < offsets[i + 1]; e += tile_tokens) {
                        const int nt = static_cast<int>(lo(tile_tokens, offsets[i + 1] - e));
                        const block_q8_k* xs[tile_tokens];
                        float* out[tile_tokens];
                        for (int j = 0; j < nt; ++j) {
                            xs[j] = x.data + tokens[e + j] * x.stride;
                            out[j] = out_row(y[m], tokens[e + j]) + i;
                        }
                        dot_any<B>(nt, row<B>(w[m], i), xs, blocks, out, nullptr);
                    }
        });
    }

    // ---- the accumulate ----

    // Columns of a super-block one pass keeps in registers: sixteen registers' worth with
    // AVX-512's 32 registers, eight with AVX2's 16.
    static constexpr int64_t pass_cols = L >= 16 ? 16 * L : 8 * L;
    static_assert(qk_k % pass_cols == 0);
    static constexpr int U = static_cast<int>(pass_cols / L);

    // acc (the columns [P, P + pass_cols) of super-block b) += a * the row's values there; for
    // Q4_K, bias[k] += a * dmin * m of the pass's sub-block k.
    template <int64_t P>
    [[gnu::always_inline]] static void axpy_block(const block_q4_k& b, float a, vec (&acc)[U],
                                                  float (&bias)[pass_cols / 32]) {
        uint32_t s[4];
        q4k_scales(b.scales, s);
        uint8_t sc[16];
        __builtin_memcpy(sc, s, sizeof(sc));
        const float ad = a * half(b.d), am = a * half(b.dmin);
        constexpr int per_sub = static_cast<int>(32 / L);
#pragma GCC unroll 8
        for (int k = 0; k < static_cast<int>(pass_cols / 32); ++k) {
            const int sub = static_cast<int>(P / 32) + k;
            const vec scale = V::set1(ad * static_cast<float>(sc[sub]));
            bias[k] += am * static_cast<float>(sc[8 + sub]);
            const uint8_t* qs = b.qs + 32 * (sub / 2);
#pragma GCC unroll 4
            for (int u = 0; u < per_sub; ++u) {
                const ivec bytes = V::widen_u8(qs + u * L);
                const ivec q = sub % 2 == 0 ? V::iand(bytes, V::iset32(15)) : V::srli(bytes, 4);
                acc[k * per_sub + u] = V::fma(V::cvt(q), scale, acc[k * per_sub + u]);
            }
        }
    }

    template <int64_t P>
    [[gnu::always_inline]] static void axpy_block(const block_q6_k& b, float a, vec (&acc)[U],
                                                  float (&)[pass_cols / 32]) {
        static_assert(L <= 16);
        const float ad = a * half(b.d);
        constexpr int per_sub = static_cast<int>(16 / L);
#pragma GCC unroll 16
        for (int k = 0; k < static_cast<int>(pass_cols / 16); ++k) {
            const int e0 = static_cast<int>(P) + 16 * k; // the sub-block's first element
            const vec scale = V::set1(ad * static_cast<float>(b.scales[e0 / 16]));
            const int h = e0 / 128, quarter = e0 % 128 / 32, l0 = e0 % 32;
            const uint8_t* ql = b.ql + 64 * h + 32 * (quarter & 1) + l0;
            const uint8_t* qh = b.qh + 32 * h + l0;
#pragma GCC unroll 2
            for (int u = 0; u < per_sub; ++u) {
                const ivec low_bytes = V::widen_u8(ql + u * L);
                const ivec low =
                    quarter < 2 ? V::iand(low_bytes, V::iset32(15)) : V::srli(low_bytes, 4);
                const ivec high = V::iand(V::srli(V::widen_u8(qh + u * L), 2 * quarter),
                                          V::iset32(3));
                const vec q = V::sub(V::cvt(V::ior(low, V::slli(high, 4))), V::set1(32.0f));
                acc[k * per_sub + u] = V::fma(q, scale, acc[k * per_sub + u]);
            }
        }
    }

    // The pass over columns [P, P + pass_cols) of super-block b, then the next pass.
    template <class B, int64_t P>
    static void axpy_pass(const weights& wt, const int32_t* rows, int64_t n, const float* a,
                          float* y, int64_t b) {
        float* yp = y + b * qk_k + P;
        vec acc[U];
#pragma GCC unroll 16
        for (int u = 0; u < U; ++u)
            acc[u] = V::load(yp + u * L);
        float bias[pass_cols / 32] = {};
        // The rows a few entries ahead are fetched whole in the first pass.
        constexpr int64_t ahead = 4;
        for (int64_t k = 0; k < n; ++k) {
            if constexpr (P == 0) {
                if (k + ahead < n) prefetch_block(row<B>(wt, rows[k + ahead]) + b);
            }
            const float coef = a[rows[k]];
            if (coef == 0.0f) continue;
            axpy_block<P>(row<B>(wt, rows[k])[b], coef, acc, bias);
        }
#pragma GCC unroll 16
        for (int u = 0; u < U; ++u)
            V::store(yp + u * L, V::sub(acc[u], V::set1(bias[u * L / 32])));
        if constexpr (P + pass_cols < qk_k) axpy_pass<B, P + pass_cols>(wt, rows, n, a, y, b);
    }

    // y[c0 .. c1) += a[rows[k]] * wt[rows[k]][c0 .. c1) for k in order, skipping zero
    // coefficients; c0 and c1 multiples of qk_k.
    static void axpy_rows_k(const weights& wt, const int32_t* rows, int64_t n, const float* a,
                            float* y, int64_t c0, int64_t c1) {
        visit(wt.type, [&]<class B>(const B*) {
            for (int64_t b = c0 / qk_k; b < c1 / qk_k; ++b)
                axpy_pass<B, 0>(wt, rows, n, a, y, b);
        });
    }
};

} // namespace pi::cpu::simd
