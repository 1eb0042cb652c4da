#pragma once
// The inner loops of the fast CPU kernels: one table of plain function pointers per instruction
// set, each compiled in its own file with that set enabled (simd_avx2.cpp, simd_avx512.cpp) and
// picked at run time. Threads, scratch and argument checks stay in the portable kernels; these
// loops only see raw, already validated pointers.
//
// Every output element is a fixed sequence of float FMAs that does not depend on how the caller
// split the work into chunks, on which rows or tokens share a register tile, or on the batch
// size: results are identical for any thread count, and a token's outputs are the same whether
// it is decoded alone or inside a prompt batch (given ascending active lists).
//
// This header is included by the instruction-set files, so it holds declarations and constants
// only: an inline function used there would be compiled with AVX-512 enabled in one object file
// and could be the copy the linker keeps for every caller.
#include <cstddef>
#include <cstdint>

#include "quant/blocks.hpp"

namespace pi::cpu {

// A matrix of F32 or F16 rows of `cols` elements, `stride` bytes apart.
struct weights {
    const std::byte* data;
    std::size_t stride;
    int64_t cols;
    bool f16;
};

// A matrix of Q4_0 (q8 false) or Q8_0 rows of `blocks` blocks, `stride` bytes apart.
struct quant_weights {
    const std::byte* data;
    std::size_t stride;
    int64_t blocks;
    bool q8;
};

// F32 rows (one per token), `stride` bytes apart.
struct f32_rows {
    const float* data;
    std::size_t stride;
};
struct f32_rows_out {
    float* data;
    std::size_t stride;
};

// One (token, query head) of causal attention: q and out hold head_dim floats; k and v point at
// the head's first element in cache row 0.
struct attend_args {
    const float* q;
    const std::byte* k;
    std::size_t k_stride;
    bool k_f16;
    const std::byte* v;
    std::size_t v_stride;
    bool v_f16;
    int64_t head_dim;
    int32_t n_kv;
    const int32_t* kv_pos;
    int32_t q_pos;
    float scale;
    float* out;
};

// axpy_rows_batch accumulates a block of columns of every token in a local copy whose rows are
// padded so that they neither share L1 sets nor 4 KiB-alias each other, as y's rows (whole
// multiples of 4 KiB apart for typical widths) would.
inline constexpr int64_t axpy_batch_block = 128;
inline constexpr int64_t axpy_batch_stride = axpy_batch_block + 16;
inline constexpr int64_t axpy_batch_scratch(int64_t n_tok) {
    return n_tok * axpy_batch_stride;
}

struct simd_kernels {
    // y[t][r] = w[r] . x[t] for rows r in [r0, r1) and tokens t in [0, n_tok).
    void (*mul_mat)(const weights& w, int64_t r0, int64_t r1, f32_rows x, int64_t n_tok,
                    f32_rows_out y);
    // y[rows[k]] = w[rows[k]] . x for k in [0, n).
    void (*mul_rows)(const weights& w, const int32_t* rows, int64_t n, const float* x, float* y);
    // Neuron-major row-sparse product: for each row i in [i0, i1) and each token t in
    // tokens[offsets[i] .. offsets[i + 1]), y[t][i] = w[i] . x[t].
    void (*mul_rows_batch)(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                           const int32_t* tokens, f32_rows x, f32_rows_out y);
    // y[c0 .. c1) += a[rows[k]] * wt[rows[k]][c0 .. c1) for k = 0 .. n-1 in order, skipping
    // zero coefficients; every element is one FMA chain starting from its old value.
    void (*axpy_rows)(const weights& wt, const int32_t* rows, int64_t n, const float* a, float* y,
                      int64_t c0, int64_t c1);
    // Neuron-major column-sparse accumulate: for each row i in [0, n_rows) in order and each
    // entry e in [offsets[i], offsets[i + 1]), y[tokens[e]][c0 .. c1) += coefs[e] * wt[i][...],
    // for tokens in [0, n_tok). `scratch` holds axpy_batch_scratch(n_tok) floats.
    void (*axpy_rows_batch)(const weights& wt, int64_t n_rows, const int32_t* offsets,
                            const int32_t* tokens, const float* coefs, int64_t n_tok,
                            f32_rows_out y, int64_t c0, int64_t c1, float* scratch);
    // Softmax attention of one query head over the visible cache rows (zeros if none).
    void (*attend)(const attend_args& a);
    // Writes the ascending i in [0, n) with p[i] >= threshold to out (when not null) and returns
    // their number.
    int64_t (*select)(const float* p, int64_t n, float threshold, int32_t* out);
    // y = x / sqrt(mean(x^2) + eps) * w over n elements; y may be x.
    void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* y);
    // Element-wise over n floats; out may be an input.
    void (*add)(const float* a, const float* b, float* out, int64_t n);
    void (*relu)(const float* x, float* out, int64_t n);
    // out = act(gate) * up for a validated pib_glu_kind.
    void (*glu)(const float* gate, const float* up, float* out, int64_t n, int32_t kind);
    // y[r] = w[r] . x for r = rows[i] (or first + i when rows is null), i in [0, n); x is the
    // activation row quantized to Q8_0 (codes in [-127, 127]). One float FMA chain per row over
    // the blocks in order, each block an exact integer dot product scaled by d_w * d_x.
    void (*mul_rows_q)(const quant_weights& w, const int32_t* rows, int64_t first, int64_t n,
                       const block_q8_0* x, float* y);
    // For blocks [b0, b1) of columns: y += a[rows[k]] * dequant(wt[rows[k]]) for k = 0 .. n-1 in
    // order, skipping zero coefficients; each element gets one FMA by a * d per row.
    void (*axpy_rows_q)(const quant_weights& wt, const int32_t* rows, int64_t n, const float* a,
                        float* y, int64_t b0, int64_t b1);
    // y[t][r] = w[r] . x[t] for rows r in [r0, r1) and tokens t in [0, n_tok); x holds the
    // n_tok activation rows quantized to Q8_0, w.blocks blocks each, back to back. Every output
    // gets exactly mul_rows_q's sequence of operations.
    void (*mul_mat_q)(const quant_weights& w, int64_t r0, int64_t r1, const block_q8_0* x,
                      int64_t n_tok, f32_rows_out y);
};

// The tables of the instruction-set files; use one only when the CPU supports its set.
const simd_kernels& avx2_kernels() noexcept;
const simd_kernels& avx512_kernels() noexcept;

} // namespace pi::cpu
