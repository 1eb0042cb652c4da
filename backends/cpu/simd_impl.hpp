#pragma once
// The loops behind simd_kernels, written once over a vector type V that each instruction-set
// file defines in its own anonymous namespace. Everything here is a member of impl<V>, so every
// instantiation has internal linkage and no code compiled for one instruction set can be shared
// with another object file. For the same reason this header calls no standard library function.
// What V must provide is the concept quant_vector (simd_vector.hpp).
//
// The accumulates take rows of any weight type W: float, uint16_t (F16) or a quantized block,
// read a vector of columns at a time, quantized rows a block at a time (32-column aligned ranges).
#include "cpu_simd.hpp"
#include "pib_backend.h"
#include "simd_kquant_impl.hpp"
#include "simd_quant_impl.hpp"
#include "simd_vector.hpp"

#include <cstddef>
#include <cstdint>

namespace pi::cpu::simd {

template <quant_vector V> struct impl {
    using vec = typename V::vec;
    using Q = quant_impl<V>;
    using KQ = kquant_impl<V>;

    // e^x within 2 ulp on [-87.3, 88] (clamped outside): x = n ln2 + r, a degree-6 polynomial
    // for e^r and a scale by 2^n.
    static vec exp(vec x) {
        x = V::min(V::max(x, V::set1(-87.33654f)), V::set1(88.0f));
        const vec n = V::round_nearest(V::mul(x, V::set1(1.44269504089f)));
        vec r = V::fma(n, V::set1(-0.693359375f), x);
        r = V::fma(n, V::set1(2.12194440e-4f), r);
        vec p = V::set1(1.9875691500e-4f);
        p = V::fma(p, r, V::set1(1.3981999507e-3f));
        p = V::fma(p, r, V::set1(8.3334519073e-3f));
        p = V::fma(p, r, V::set1(4.1665795894e-2f));
        p = V::fma(p, r, V::set1(1.6666665459e-1f));
        p = V::fma(p, r, V::set1(5.0000001201e-1f));
        p = V::add(V::fma(p, V::mul(r, r), r), V::set1(1.0f));
        return V::scale_pow2(p, n);
    }
    static constexpr int64_t L = V::lanes;

    static int64_t lo(int64_t a, int64_t b) { return a < b ? a : b; }

    static void prefetch_far_bytes(const void* p, int64_t bytes) {
        for (int64_t b = 0; b < bytes; b += 64)
            V::prefetch_far(static_cast<const std::byte*>(p) + b);
    }

    template <class W> static constexpr bool is_block = requires(const W& w) { w.qs; };

    // The address of column c of the row w, and the bytes of n columns.
    template <class W> static const void* at(const W* w, int64_t c) {
        return is_block<W> ? static_cast<const void*>(w + c / qk8_0) : w + c;
    }
    template <class W> static int64_t bytes_of(int64_t n) {
        return (is_block<W> ? n / qk8_0 : n) * static_cast<int64_t>(sizeof(W));
    }

    // Whether column c starts a new cache line of float or F16 elements (one prefetch per line).
    template <class W> static bool line_start(int64_t c) {
        constexpr int64_t per_line = 64 / static_cast<int64_t>(sizeof(W));
        return L >= per_line || c % per_line == 0;
    }

    template <class W> static const W* row(const weights& w, int64_t r) {
        return reinterpret_cast<const W*>(w.data + static_cast<std::size_t>(r) * w.stride);
    }
    static const float* row(f32_rows m, int64_t t) {
        return reinterpret_cast<const float*>(reinterpret_cast<const std::byte*>(m.data) +
                                              static_cast<std::size_t>(t) * m.stride);
    }
    static float* row(f32_rows_out m, int64_t t) {
        return reinterpret_cast<float*>(reinterpret_cast<std::byte*>(m.data) +
                                        static_cast<std::size_t>(t) * m.stride);
    }

    // ---- dot products ----

    // out[r * T + t] = w[r] . x[t] over k columns: one accumulator per (row, token), so each
    // result is the same FMA chain whatever R and T are. With P, the rows `next` are fetched
    // into the cache at the pace the current rows are read.
    template <class W, int R, int T, bool P>
    static void dot_tile(const W* const* w, const float* const* x, int64_t k, float* out,
                         const W* const* next) {
        vec acc[R * T];
#pragma GCC unroll 32
        for (int i = 0; i < R * T; ++i)
            acc[i] = V::zero();
        int64_t c = 0;
        for (; c + L <= k; c += L) {
            vec wv[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                if constexpr (P) {
                    if (line_start<W>(c)) V::prefetch_far(next[r] + c);
                }
                wv[r] = V::load(w[r] + c);
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const vec xv = V::load(x[t] + c);
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r)
                    acc[r * T + t] = V::fma(wv[r], xv, acc[r * T + t]);
            }
        }
        if (c < k) {
            const int64_t n = k - c;
            vec wv[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r)
                wv[r] = V::load_n(w[r] + c, n);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const vec xv = V::load_n(x[t] + c, n);
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r)
                    acc[r * T + t] = V::fma(wv[r], xv, acc[r * T + t]);
            }
        }
#pragma GCC unroll 32
        for (int i = 0; i < R * T; ++i)
            out[i] = V::sum(acc[i]);
    }

    // dot_tile for nr <= R rows and nt <= T tokens (out[r * nt + t]), without prefetch.
    template <class W, int R, int T>
    static void tile(int nr, int nt, const W* const* w, const float* const* x, int64_t k,
                     float* out) {
        if constexpr (R > 1) {
            if (nr < R) return tile<W, R - 1, T>(nr, nt, w, x, k, out);
        }
        if constexpr (T > 1) {
            if (nt < T) return tile<W, R, T - 1>(nr, nt, w, x, k, out);
        }
        dot_tile<W, R, T, false>(w, x, k, out, nullptr);
    }

    // y[rows[k]] = w[rows[k]] . x; rows[k] may be given as a list or as r0 + k.
    template <class W, class RowOf>
    static void rows_times_vector(const weights& w, int64_t n, RowOf row_of, const float* x,
                                  float* y) {
        constexpr int R = V::decode_rows;
        const float* xp[1] = {x};
        // Rows are often whole pages apart, where hardware prefetchers stop: each group of rows
        // fetches the next group while it runs, and the first group is fetched up front.
        for (int64_t k = 0; k < lo(R, n); ++k)
            prefetch_far_bytes(row<W>(w, row_of(k)), w.cols * static_cast<int64_t>(sizeof(W)));
        for (int64_t k = 0; k < n; k += R) {
            const int nr = static_cast<int>(lo(R, n - k));
            const W* wp[R];
            for (int i = 0; i < nr; ++i)
                wp[i] = row<W>(w, row_of(k + i));
            float out[R];
            if (nr == R && k + 2 * R <= n) {
                const W* next[R];
                for (int i = 0; i < R; ++i)
                    next[i] = row<W>(w, row_of(k + R + i));
                dot_tile<W, R, 1, true>(wp, xp, w.cols, out, next);
            } else {
                tile<W, R, 1>(nr, 1, wp, xp, w.cols, out);
            }
            for (int i = 0; i < nr; ++i)
                y[row_of(k + i)] = out[i];
        }
    }

    template <class W>
    static void mul_mat_t(const weights& w, int64_t r0, int64_t r1, f32_rows x, int64_t n_tok,
                          f32_rows_out y) {
        if (n_tok == 1) {
            rows_times_vector<W>(
                w, r1 - r0, [r0](int64_t k) { return r0 + k; }, x.data, y.data);
            return;
        }
        // Tokens outside, rows inside: the caller keeps a chunk's rows small enough to stay in
        // the L2 cache while every token block passes over them.
        constexpr int R = V::tile_rows, T = V::tile_tokens;
        for (int64_t t0 = 0; t0 < n_tok; t0 += T) {
            const int nt = static_cast<int>(lo(T, n_tok - t0));
            const float* xp[T];
            for (int t = 0; t < nt; ++t)
                xp[t] = row(x, t0 + t);
            for (int64_t r = r0; r < r1; r += R) {
                const int nr = static_cast<int>(lo(R, r1 - r));
                const W* wp[R];
                for (int i = 0; i < nr; ++i)
                    wp[i] = row<W>(w, r + i);
                float out[R * T];
                tile<W, R, T>(nr, nt, wp, xp, w.cols, out);
                for (int t = 0; t < nt; ++t) {
                    float* yt = row(y, t0 + t);
                    for (int i = 0; i < nr; ++i)
                        yt[r + i] = out[i * nt + t];
                }
            }
        }
    }

    template <class W>
    static void mul_rows_batch_t(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                                 const int32_t* tokens, f32_rows x, f32_rows_out y) {
        constexpr int T = V::gather_tokens;
        for (int64_t i = i0; i < i1; ++i) {
            const W* wp[1] = {row<W>(w, i)};
            for (int64_t e = offsets[i]; e < offsets[i + 1]; e += T) {
                const int nt = static_cast<int>(lo(T, offsets[i + 1] - e));
                const float* xp[T];
                for (int t = 0; t < nt; ++t)
                    xp[t] = row(x, tokens[e + t]);
                float out[T];
                tile<W, 1, T>(1, nt, wp, xp, w.cols, out);
                for (int t = 0; t < nt; ++t)
                    row(y, tokens[e + t])[i] = out[t];
            }
        }
    }

    // ---- accumulation of scaled rows ----

    // y_h[c0 .. c1) = fma(cf[h][G-1], w[G-1], ... fma(cf[h][0], w[0], y_h)) element by element,
    // for the ny outputs y_h: each row vector is read and converted once for all of them. Many:
    // ny may exceed one (attention's heads sharing a cache head); otherwise the coefficients
    // stay in registers. With P, the rows `next` are fetched into L1 at the pace these are read.
    template <class W, int G, bool P, bool Many>
    static void axpy_group(const W* const* w, const float* const* cf, int ny, float* const* y,
                           int64_t c0, int64_t c1, const W* const* next) {
        vec a[G];
        if constexpr (!Many) {
#pragma GCC unroll 8
            for (int g = 0; g < G; ++g)
                a[g] = V::set1(cf[0][g]);
        }
        for (int64_t c = c0; c < c1; c += L) {
            const int64_t n = lo(L, c1 - c);
            vec wv[G];
#pragma GCC unroll 8
            for (int g = 0; g < G; ++g) {
                if constexpr (P) {
                    if (line_start<W>(c)) V::prefetch(next[g] + c);
                }
                wv[g] = n == L ? V::load(w[g] + c) : V::load_n(w[g] + c, n);
            }
            for (int h = 0; h < (Many ? ny : 1); ++h) {
                vec acc = n == L ? V::load(y[h] + c) : V::load_n(y[h] + c, n);
#pragma GCC unroll 8
                for (int g = 0; g < G; ++g)
                    acc = V::fma(Many ? V::set1(cf[h][g]) : a[g], wv[g], acc);
                if (n == L)
                    V::store(y[h] + c, acc);
                else
                    V::store_n(y[h] + c, acc, n);
            }
        }
    }

    static constexpr int axpy_rows_at_once = 4;

    template <class W, bool Many, int G = axpy_rows_at_once>
    static void axpy_any(int g, const W* const* w, const float* const* cf, int ny, float* const* y,
                         int64_t c0, int64_t c1) {
        if constexpr (G > 1) {
            if (g < G) return axpy_any<W, Many, G - 1>(g, w, cf, ny, y, c0, c1);
        }
        axpy_group<W, G, false, Many>(w, cf, ny, y, c0, c1, nullptr);
    }

    // Quantized rows, a group of listed rows at a time: NB blocks of y stay in registers while
    // the group's rows pass, so y is loaded and stored once per pass and each row's scale is
    // converted once per block, and the group's pieces of rows stay in L1 from one pass to the
    // next. The first pass of a group also fetches rows a few ahead, their whole column range,
    // into L2: scattered rows are too short a run for the hardware prefetchers.
    static constexpr int axpy_block_registers = 16;
    static constexpr int64_t axpy_group_rows = 32;
    static constexpr int64_t axpy_prefetch_rows = 8;

    template <class B, int NB, bool First>
    static void axpy_pass(const weights& wt, const int32_t* rows, int64_t n, int64_t listed,
                          const float* a, float* y, uint64_t b, uint64_t b0, int64_t range) {
        constexpr int U = static_cast<int>(qk8_0 / L);
        float* yb = y + b * qk8_0;
        vec acc[NB * U];
#pragma GCC unroll 16
        for (int i = 0; i < NB * U; ++i)
            acc[i] = V::load(yb + i * L);
        for (int64_t k = 0; k < n; ++k) {
            if constexpr (First) {
                // Rows whose coefficient is zero are skipped below: never fetched.
                if (k + axpy_prefetch_rows < listed && a[rows[k + axpy_prefetch_rows]] != 0.0f)
                    prefetch_far_bytes(row<B>(wt, rows[k + axpy_prefetch_rows]) + b0, range);
            }
            const float v = a[rows[k]];
            if (v == 0.0f) continue;
            const B* r = row<B>(wt, rows[k]) + b;
            if constexpr (Q::template symmetric<B>) {
                alignas(16) float cf[(NB + 3) / 4 * 4];
#pragma GCC unroll 4
                for (int j = 0; j < NB; j += 4)
                    Q::scaled_d(r + j, lo(4, NB - j), v, cf + j);
#pragma GCC unroll 8
                for (int j = 0; j < NB; ++j) {
                    const vec cv = V::set1(cf[j]);
                    vec qv[U];
                    Q::block_codes(r[j], qv);
#pragma GCC unroll 4
                    for (int u = 0; u < U; ++u)
                        acc[j * U + u] = V::fma(cv, qv[u], acc[j * U + u]);
                }
            } else {
                const vec av = V::set1(v);
#pragma GCC unroll 8
                for (int j = 0; j < NB; ++j) {
                    vec wv[U];
                    Q::block_floats(r[j], wv);
#pragma GCC unroll 4
                    for (int u = 0; u < U; ++u)
                        acc[j * U + u] = V::fma(av, wv[u], acc[j * U + u]);
                }
            }
        }
#pragma GCC unroll 16
        for (int i = 0; i < NB * U; ++i)
            V::store(yb + i * L, acc[i]);
    }

    template <class B, int NB, bool First>
    static void axpy_pass_any(int nb, const weights& wt, const int32_t* rows, int64_t n,
                              int64_t listed, const float* a, float* y, uint64_t b, uint64_t b0,
                              int64_t range) {
        if constexpr (NB > 1) {
            if (nb < NB)
                return axpy_pass_any<B, NB - 1, First>(nb, wt, rows, n, listed, a, y, b, b0, range);
        }
        axpy_pass<B, NB, First>(wt, rows, n, listed, a, y, b, b0, range);
    }

    template <class B>
    static void axpy_blocks_t(const weights& wt, const int32_t* rows, int64_t n, const float* a,
                              float* y, int64_t c0, int64_t c1) {
        constexpr int NB = axpy_block_registers / static_cast<int>(qk8_0 / L);
        const uint64_t b0 = static_cast<uint64_t>(c0) / qk8_0;
        const uint64_t b1 = static_cast<uint64_t>(c1) / qk8_0;
        const auto range = static_cast<int64_t>((b1 - b0) * sizeof(B));
        for (int64_t k0 = 0; k0 < n; k0 += axpy_group_rows) {
            const int32_t* group = rows + k0;
            const int64_t g = lo(axpy_group_rows, n - k0);
            for (uint64_t b = b0; b < b1; b += NB) {
                const int nb = static_cast<int>(lo(NB, static_cast<int64_t>(b1 - b)));
                if (b == b0)
                    axpy_pass_any<B, NB, true>(nb, wt, group, g, n - k0, a, y, b, b0, range);
                else
                    axpy_pass_any<B, NB, false>(nb, wt, group, g, n - k0, a, y, b, b0, range);
            }
        }
    }

    template <class W>
    static void axpy_rows_t(const weights& wt, const int32_t* rows, int64_t n, const float* a,
                            float* y, int64_t c0, int64_t c1) {
        constexpr int G = axpy_rows_at_once;
        int64_t k = 0;
        // The next G rows with a nonzero coefficient.
        auto gather = [&](const W** w, float* cf) {
            int g = 0;
            for (; g < G && k < n; ++k) {
                const float v = a[rows[k]];
                if (v == 0.0f) continue;
                w[g] = row<W>(wt, rows[k]);
                cf[g++] = v;
            }
            return g;
        };
        const W* cur[G];
        const W* next[G];
        float cur_cf[G], next_cf[G];
        const float* const cfs[1] = {cur_cf};
        float* const ys[1] = {y};
        int n_cur = gather(cur, cur_cf);
        while (n_cur > 0) {
            const int n_next = gather(next, next_cf);
            if (n_cur == G && n_next == G)
                axpy_group<W, G, true, false>(cur, cfs, 1, ys, c0, c1, next);
            else
                axpy_any<W, false>(n_cur, cur, cfs, 1, ys, c0, c1);
            for (int g = 0; g < n_next; ++g) {
                cur[g] = next[g];
                cur_cf[g] = next_cf[g];
            }
            n_cur = n_next;
        }
    }

    // dst[0 .. n) = columns [c0, c0 + n) of the row src as floats; returns the floats to read.
    // For a symmetric block format (Q::symmetric) the floats are the codes q - o and `scales`
    // gets each block's d, as the accumulates scale them (see Q::scaled_d).
    template <class W>
    static const float* widen(const W* src, int64_t c0, int64_t n, float* dst, float* scales) {
        if constexpr (is_block<W>) {
            constexpr int U = static_cast<int>(qk8_0 / L);
            const W* blk = src + static_cast<uint64_t>(c0) / qk8_0;
            for (int64_t c = 0; c < n; c += qk8_0, ++blk) {
                vec wv[U];
                if constexpr (Q::template symmetric<W>) {
                    Q::block_codes(*blk, wv);
                    scales[c / qk8_0] = Q::half(blk->d);
                } else {
                    Q::block_floats(*blk, wv);
                }
#pragma GCC unroll 4
                for (int u = 0; u < U; ++u)
                    V::store(dst + c + u * L, wv[u]);
            }
            return dst;
        } else if constexpr (sizeof(W) == sizeof(float)) {
            return src + c0;
        } else {
            int64_t c = 0;
            for (; c + L <= n; c += L)
                V::store(dst + c, V::load(src + c0 + c));
            if (c < n) V::store_n(dst + c, V::load_n(src + c0 + c, n - c), n - c);
            return dst;
        }
    }

    static constexpr int64_t prefetch_rows = 16;

    static void prefetch_bytes(const void* p, int64_t bytes) {
        for (int64_t b = 0; b < bytes; b += 64)
            V::prefetch(static_cast<const std::byte*>(p) + b);
    }

    static void copy(const float* src, float* dst, int64_t n) {
        int64_t c = 0;
        for (; c + L <= n; c += L)
            V::store(dst + c, V::load(src + c));
        if (c < n) V::store_n(dst + c, V::load_n(src + c, n - c), n - c);
    }

    // y[c0 .. c0 + min(n, U L)) = fma(cf[g_k], w[g_k], ... fma(cf[g_0], w[g_0], y)) for the set
    // bits g_0 < ... < g_k of `rows`, element by element, as axpy_group would one row at a time;
    // cf holds each row's coefficient per 32-column block of the column block (per_row of
    // them), from the block holding column c0 on.
    template <int U, bool Full>
    static void axpy_marked(uint32_t rows, const float* const* w, const float* cf, float* y,
                            int64_t c0, int64_t n) {
        constexpr int64_t per_row = axpy_batch_block / qk8_0;
        auto lanes = [n](int u) { return Full ? L : lo(L, n - u * L > 0 ? n - u * L : 0); };
        auto load = [&](const float* p, int u) {
            return Full ? V::load(p + u * L) : V::load_n(p + u * L, lanes(u));
        };
        vec acc[U];
#pragma GCC unroll 16
        for (int u = 0; u < U; ++u)
            acc[u] = load(y + c0, u);
        for (; rows != 0; rows &= rows - 1u) {
            const int g = __builtin_ctz(rows);
            const float* a = cf + g * per_row + c0 / qk8_0;
#pragma GCC unroll 16
            for (int u = 0; u < U; ++u)
                acc[u] = V::fma(V::set1(a[u * L / qk8_0]), load(w[g] + c0, u), acc[u]);
        }
#pragma GCC unroll 16
        for (int u = 0; u < U; ++u) {
            if constexpr (Full)
                V::store(y + c0 + u * L, acc[u]);
            else
                V::store_n(y + c0 + u * L, acc[u], lanes(u));
        }
    }

    template <class W>
    static void axpy_rows_batch_t(const weights& wt, int64_t n_rows, const int32_t* offsets,
                                  const int32_t* tokens, const float* coefs, int64_t n_tok,
                                  f32_rows_out y, int64_t c0, int64_t c1, float* scratch) {
        // A block of columns of every token stays in the local copy while all rows pass; a
        // quantized or F16 row block is converted once for all its tokens.
        constexpr int64_t block = axpy_batch_block, stride = axpy_batch_stride;
        constexpr int G = static_cast<int>(axpy_batch_group);
        // Vectors of columns kept in registers per pass over a token's block.
        constexpr int U = 8;
        float* local = scratch;
        float* cf = scratch + n_tok * stride;
        auto* marks = reinterpret_cast<uint32_t*>(cf + n_tok * axpy_batch_coefs);
        auto* touched = reinterpret_cast<int32_t*>(marks + n_tok);
        for (int64_t t = 0; t < n_tok; ++t)
            marks[t] = 0;
        alignas(64) float buf[G][block];
        constexpr int64_t per_row = block / qk8_0;
        float block_scales[G][per_row] = {};
        constexpr bool scaled = [] {
            if constexpr (is_block<W>)
                return Q::template symmetric<W>;
            else
                return false;
        }();
        for (int64_t b0 = c0; b0 < c1; b0 += block) {
            const int64_t n = lo(block, c1 - b0);
            for (int64_t t = 0; t < n_tok; ++t)
                copy(row(y, t) + b0, local + t * stride, n);
            for (int64_t i0 = 0; i0 < n_rows; i0 += G) {
                const int64_t i1 = lo(n_rows, i0 + G);
                // Row blocks are a few cache lines a whole row apart: too short a run for the
                // hardware prefetchers, so fetch the group's next rows ahead.
                for (int64_t i = i0 + prefetch_rows; i < i1 + prefetch_rows && i < n_rows; ++i)
                    prefetch_bytes(at(row<W>(wt, i), b0), bytes_of<W>(n));
                const float* src[G];
                int64_t n_touched = 0;
                for (int64_t i = i0; i < i1; ++i) {
                    if (offsets[i] == offsets[i + 1]) continue;
                    const int g = static_cast<int>(i - i0);
                    src[g] = widen(row<W>(wt, i), b0, n, buf[g], block_scales[g]);
                    for (int64_t e = offsets[i]; e < offsets[i + 1]; ++e) {
                        const int32_t t = tokens[e];
                        if (marks[t] == 0) touched[n_touched++] = t;
                        marks[t] |= 1u << g;
                        // As Q::scaled_d rounds them, block by block, for symmetric formats.
                        float* a = cf + t * axpy_batch_coefs + g * per_row;
                        for (int64_t j = 0; j < per_row; ++j)
                            a[j] = scaled ? coefs[e] * block_scales[g][j] : coefs[e];
                    }
                }
                for (int64_t k = 0; k < n_touched; ++k) {
                    const int32_t t = touched[k];
                    float* yt = local + t * stride;
                    int64_t c = 0;
                    for (; c + U * L <= n; c += U * L)
                        axpy_marked<U, true>(marks[t], src, cf + t * axpy_batch_coefs, yt, c,
                                             U * L);
                    if (c < n)
                        axpy_marked<U, false>(marks[t], src, cf + t * axpy_batch_coefs, yt, c,
                                              n - c);
                    marks[t] = 0;
                }
            }
            for (int64_t t = 0; t < n_tok; ++t)
                copy(local + t * stride, row(y, t) + b0, n);
        }
    }

    // ---- attention ----

    static float exp1(float x) {
        return V::first(exp(V::set1(x)));
    }

    // Cache rows an attention step scores at once.
    static constexpr int attend_block = 64;

    // Online softmax over blocks of cache rows, for the a.n_heads query heads that share the
    // cache's head: scores of a block, then each head's running maximum, sum and weighted V rows
    // (accumulated in its out) are rescaled when its maximum grows. Every head gets the bits it
    // would get alone (dot_tile and axpy_group keep each head's chains); the heads share each
    // cache row's conversion.
    template <class K, class VC> static void attend_t(const attend_args& a) {
        constexpr int H = attend_heads;
        constexpr int G = axpy_rows_at_once;
        static_assert(H >= attend_tile_heads);
        const int nh = a.n_heads;
        const int64_t hd = a.head_dim;
        const float* qp[H];
        float* out[H];
        float max[H], sum[H];
        for (int h = 0; h < nh; ++h) {
            qp[h] = a.q + h * hd;
            out[h] = a.out + h * hd;
            for (int64_t c = 0; c < hd; c += L)
                V::store_n(out[h] + c, V::zero(), lo(L, hd - c));
            max[h] = -__builtin_inff();
            sum[h] = 0.0f;
        }
        alignas(64) float s[H][attend_block];
        int32_t vis[attend_block];
        for (int64_t j0 = 0; j0 < a.n_kv; j0 += attend_block) {
            const int64_t j1 = lo(j0 + attend_block, a.n_kv);
            int nv = 0;
            for (int64_t j = j0; j < j1; ++j)
                if (a.kv_pos[j] >= 0 && a.kv_pos[j] <= a.q_pos) vis[nv++] = static_cast<int32_t>(j);
            if (nv == 0) continue;
            scores<K>(a, vis, nv, qp, nh, s);
            for (int h = 0; h < nh; ++h) {
                float* sh = s[h];
                float block_max = sh[0];
                for (int v = 1; v < nv; ++v)
                    if (sh[v] > block_max) block_max = sh[v];
                if (block_max > max[h]) {
                    if (sum[h] > 0.0f) {
                        const float f = exp1(max[h] - block_max);
                        sum[h] *= f;
                        const vec fv = V::set1(f);
                        for (int64_t c = 0; c < hd; c += L) {
                            const int64_t n = lo(L, hd - c);
                            V::store_n(out[h] + c, V::mul(V::load_n(out[h] + c, n), fv), n);
                        }
                    }
                    max[h] = block_max;
                }
                const vec mv = V::set1(max[h]);
                for (int v = 0; v < nv; v += L) {
                    const int64_t n = lo(L, nv - v);
                    V::store_n(sh + v, exp(V::sub(V::load_n(sh + v, n), mv)), n);
                }
                for (int v = 0; v < nv; ++v)
                    sum[h] += sh[v];
            }
            for (int v = 0; v < nv; v += G) {
                const int g = static_cast<int>(lo(G, nv - v));
                const VC* vp[G];
                cache_rows(a.v, a.v_stride, vis + v, g, vp);
                const float* cf[H];
                for (int h = 0; h < nh; ++h)
                    cf[h] = s[h] + v;
                axpy_any<VC, true>(g, vp, cf, nh, out, 0, hd);
            }
        }
        for (int h = 0; h < nh; ++h) {
            if (sum[h] <= 0.0f) continue;
            const vec sv = V::set1(sum[h]);
            for (int64_t c = 0; c < hd; c += L) {
                const int64_t n = lo(L, hd - c);
                V::store_n(out[h] + c, V::div(V::load_n(out[h] + c, n), sv), n);
            }
        }
    }

    // The cache rows rows[0 .. n) of a K or V cache.
    template <class T>
    static void cache_rows(const std::byte* base, std::size_t stride, const int32_t* rows, int n,
                           const T** out) {
        for (int i = 0; i < n; ++i)
            out[i] = reinterpret_cast<const T*>(base + static_cast<std::size_t>(rows[i]) * stride);
    }

    // Query heads one score tile takes: two cache rows times HT heads fill half the registers.
    static constexpr int attend_tile_heads = V::lanes == 16 ? 8 : 4;

    // s[h][v] = scale * k[vis[v]] . q[h] for the nv visible rows and nh heads: one head alone
    // takes decode_rows rows at a time, several heads two rows (each converted once) for up to
    // attend_tile_heads heads.
    template <class K>
    static void scores(const attend_args& a, const int32_t* vis, int nv, const float* const* qp,
                       int nh, float (*s)[attend_block]) {
        constexpr int R = V::decode_rows, HT = attend_tile_heads;
        const int step = nh == 1 ? R : 2;
        for (int v = 0; v < nv; v += step) {
            const int nr = static_cast<int>(lo(step, nv - v));
            const K* kp[R];
            cache_rows(a.k, a.k_stride, vis + v, nr, kp);
            float d[R * HT];
            if (nh == 1) {
                tile<K, R, 1>(nr, 1, kp, qp, a.head_dim, d);
                for (int i = 0; i < nr; ++i)
                    s[0][v + i] = d[i] * a.scale;
                continue;
            }
            for (int h0 = 0; h0 < nh; h0 += HT) {
                const int nt = static_cast<int>(lo(HT, nh - h0));
                tile<K, 2, HT>(nr, nt, kp, qp + h0, a.head_dim, d);
                for (int i = 0; i < nr; ++i)
                    for (int h = 0; h < nt; ++h)
                        s[h0 + h][v + i] = d[i * nt + h] * a.scale;
            }
        }
    }

    // ---- element-wise ----

    // out[i] = f(a[i], b[i]) a vector at a time.
    template <class F>
    static void map2(const float* a, const float* b, float* out, int64_t n, F f) {
        int64_t c = 0;
        for (; c + L <= n; c += L)
            V::store(out + c, f(V::load(a + c), V::load(b + c)));
        if (c < n) V::store_n(out + c, f(V::load_n(a + c, n - c), V::load_n(b + c, n - c)), n - c);
    }

    // max(v, 0) is 0 for NaN and -0, like the reference's v > 0 ? v : 0.
    static vec relu1(vec v) {
        return V::max(v, V::zero());
    }

    static vec silu1(vec v) {
        const vec one = V::set1(1.0f);
        return V::div(v, V::add(one, exp(V::sub(V::zero(), v))));
    }

    // ---- table entries ----

    // f(static_cast<const W*>(nullptr)) for the element type W of F32 and F16 weights, or (with
    // Quantized) the block type of quantized ones.
    template <bool Quantized = false, class F> static void visit(wtype t, F&& f) {
        if (t == wtype::f32) return f(static_cast<const float*>(nullptr));
        if (t == wtype::f16) return f(static_cast<const uint16_t*>(nullptr));
        if constexpr (Quantized)
            Q::visit(
                t, [&](auto tag) { f(static_cast<const typename decltype(tag)::type*>(nullptr)); });
    }
    template <class W> static W pointee(const W*); // the W of a visit, in decltype only

    static void mul_mat(const weights& w, int64_t r0, int64_t r1, f32_rows x, int64_t n_tok,
                        f32_rows_out y) {
        visit(w.type, [&](auto tag) { mul_mat_t<decltype(pointee(tag))>(w, r0, r1, x, n_tok, y); });
    }

    static void mul_rows(const weights& w, const int32_t* rows, int64_t n, const float* x,
                         float* y) {
        auto row_of = [rows](int64_t k) { return static_cast<int64_t>(rows[k]); };
        visit(w.type,
              [&](auto tag) { rows_times_vector<decltype(pointee(tag))>(w, n, row_of, x, y); });
    }

    static void mul_rows_batch(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                               const int32_t* tokens, f32_rows x, f32_rows_out y) {
        visit(w.type, [&](auto tag) {
            mul_rows_batch_t<decltype(pointee(tag))>(w, i0, i1, offsets, tokens, x, y);
        });
    }

    static void axpy_rows(const weights& wt, const int32_t* rows, int64_t n, const float* a,
                          float* y, int64_t c0, int64_t c1) {
        visit<true>(wt.type, [&](auto tag) {
            using W = decltype(pointee(tag));
            if constexpr (is_block<W>)
                axpy_blocks_t<W>(wt, rows, n, a, y, c0, c1);
            else
                axpy_rows_t<W>(wt, rows, n, a, y, c0, c1);
        });
    }

    static void axpy_rows_batch(const weights& wt, int64_t n_rows, const int32_t* offsets,
                                const int32_t* tokens, const float* coefs, int64_t n_tok,
                                f32_rows_out y, int64_t c0, int64_t c1, float* scratch) {
        visit<true>(wt.type, [&](auto tag) {
            axpy_rows_batch_t<decltype(pointee(tag))>(wt, n_rows, offsets, tokens, coefs, n_tok, y,
                                                      c0, c1, scratch);
        });
    }

    static void attend(const attend_args& a) {
        if (a.k_f16) {
            if (a.v_f16)
                attend_t<uint16_t, uint16_t>(a);
            else
                attend_t<uint16_t, float>(a);
        } else {
            if (a.v_f16)
                attend_t<float, uint16_t>(a);
            else
                attend_t<float, float>(a);
        }
    }

    static int64_t select(const float* p, int64_t n, float threshold, int32_t* out) {
        const vec tv = V::set1(threshold);
        int64_t k = 0;
        for (int64_t c = 0; c < n; c += L) {
            const int64_t m = lo(L, n - c);
            uint32_t bits = V::ge_mask(m == L ? V::load(p + c) : V::load_n(p + c, m), tv);
            if (m < L) bits &= (uint32_t{1} << m) - 1u; // zero-filled lanes may pass too
            if (out == nullptr) {
                k += __builtin_popcount(bits);
                continue;
            }
            if constexpr (V::compress_indices) {
                // Without a branch per index, which ~10% of lanes passing would mispredict.
                V::store_indices(out + k, bits, c);
                k += __builtin_popcount(bits);
            } else {
                for (; bits != 0; bits &= bits - 1u)
                    out[k++] = static_cast<int32_t>(c + __builtin_ctz(bits));
            }
        }
        return k;
    }

    static void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
        vec acc = V::zero();
        int64_t c = 0;
        for (; c + L <= n; c += L) {
            const vec v = V::load(x + c);
            acc = V::fma(v, v, acc);
        }
        if (c < n) {
            const vec v = V::load_n(x + c, n - c);
            acc = V::fma(v, v, acc);
        }
        const float mean = V::sum(acc) / static_cast<float>(n);
        const vec scale = V::set1(1.0f / __builtin_sqrtf(mean + eps));
        map2(x, w, y, n, [scale](vec v, vec g) { return V::mul(V::mul(v, scale), g); });
    }

    static void add(const float* a, const float* b, float* out, int64_t n) {
        map2(a, b, out, n, [](vec u, vec v) { return V::add(u, v); });
    }

    static void relu(const float* x, float* out, int64_t n) {
        map2(x, x, out, n, [](vec v, vec) { return relu1(v); });
    }

    static void glu(const float* gate, const float* up, float* out, int64_t n, int32_t kind) {
        switch (kind) {
        case PIB_GLU_RELU:
            map2(gate, up, out, n, [](vec g, vec u) { return V::mul(relu1(g), u); });
            return;
        case PIB_GLU_SILU:
            map2(gate, up, out, n, [](vec g, vec u) { return V::mul(silu1(g), u); });
            return;
        default:
            map2(gate, up, out, n, [](vec g, vec u) { return V::mul(relu1(g), relu1(u)); });
            return;
        }
    }

    static constexpr simd_kernels table() {
        return simd_kernels{
            .mul_mat = mul_mat,
            .mul_rows = mul_rows,
            .mul_rows_batch = mul_rows_batch,
            .axpy_rows = axpy_rows,
            .axpy_rows_batch = axpy_rows_batch,
            .attend = attend,
            .select = select,
            .rms_norm = rms_norm,
            .add = add,
            .relu = relu,
            .glu = glu,
            .prepare_q = Q::prepare_q,
            .mul_rows_q = Q::mul_rows_q,
            .mul_mat_q = Q::mul_mat_q,
            .mul_rows_batch_q = Q::mul_rows_batch_q,
            .prepare_k = KQ::prepare_k,
            .mul_rows_k = KQ::mul_rows_k,
            .mul_mat_k = KQ::mul_mat_k,
            .mul_rows_batch_k = KQ::mul_rows_batch_k,
            .axpy_rows_k = KQ::axpy_rows_k,
            .prepare_h = nullptr,
            .mul_rows_h = nullptr,
            .mul_mat_h = nullptr,
            .mul_rows_batch_h = nullptr,
            .weight_types = ~0u,
        };
    }
};

} // namespace pi::cpu::simd
