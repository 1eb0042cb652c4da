#pragma once
// The inner loops of the fast CPU kernels: one table of plain function pointers per instruction
// set, each compiled in its own file with that set enabled (simd_avx2.cpp, simd_avx512.cpp,
// simd_avx512_vnni.cpp; simd_neon.cpp, simd_neon_dotprod.cpp, simd_neon_fp16.cpp) and picked at
// run time. Threads, scratch and argument checks stay in the portable kernels; these loops only
// see raw, already validated pointers.
//
// Every output element is a fixed sequence of float FMAs that does not depend on how the caller
// split the work into chunks, on which rows or tokens share a register tile, or on the batch
// size: results are identical for any thread count, and a token's outputs are the same whether
// it is decoded alone or inside a prompt batch (given ascending active lists).
//
// This header is included by the instruction-set files, so it holds declarations and constants
// only: an inline function used there would be compiled with AVX-512 enabled in one object file
// and could be the copy the linker keeps for every caller.
#include "quant/blocks.hpp"

#include <cstddef>
#include <cstdint>

namespace pi::cpu {

// The element types of weight matrices the fast kernels read.
enum class wtype : uint8_t { f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q6_k };

// A matrix of rows of `cols` elements, `stride` bytes apart. Quantized rows hold cols / 32
// blocks.
struct weights {
    const std::byte* data;
    std::size_t stride;
    int64_t cols;
    wtype type;
};

// Activation rows quantized to 8 bits per block of 32 for the integer dot products with
// weights of one quantized type (see prepare_q). A token's row holds `stride` blocks (see
// quant_stride) in five arrays, one after the other:
// - the 32 codes of each block, in [-127, 127] (32 bytes per block);
// - per group k of four consecutive codes (eight 4-byte words per block), a group word whose
//   meaning depends on the weight type: for Q4_0, Q5_0 and Q8_0, the int32 -o * the group's
//   code sum, where o is the offset the kernels add to weight codes to make them unsigned; for
//   Q4_1 and Q5_1, the float d_x * the group's code sum, which the weights' minimum multiplies;
// - the block's scale d_x as a float, eight copies (32 bytes per block);
// - the codes + 128, as unsigned bytes (32 bytes per block), for the batched sparse products,
//   which then take the weights' codes signed and correct the sums on the weights' side;
// - two words per block: d_x, then the block's word, the sum of its group words (as a float
//   d_x * the code sum for Q4_1 and Q5_1) (8 bytes per block).
// The sparse products read the first three arrays (the batched ones the scales and the codes
// + 128 instead, for Q4_0, Q5_0 and Q8_0 with VNNI), the dense ones the codes and the last.
// Token t's row starts at data + t * stride * quant_block_bytes, on a cache line.
struct quant_acts {
    const std::byte* data;
    int64_t stride;
};
// Bytes per block of a quant_acts row (its part of the five arrays).
inline constexpr int64_t quant_block_bytes = 4 * 32 + 8;
// The blocks of a quant_acts row for `blocks` blocks of activations: a whole number of cache
// lines.
inline constexpr int64_t quant_stride(int64_t blocks) {
    return (blocks + 7) / 8 * 8;
}

// Activation rows quantized to Q8_K for the products with K-quant weights (Q4_K, Q6_K): token
// t's row of `stride` blocks starts at data + t * stride.
struct k_acts {
    const block_q8_k* data;
    int64_t stride;
};

// Activation rows rounded to binary16 for the F16 products of a level with FP16 arithmetic (see
// prepare_h): token t's row of `stride` values starts at data + t * stride and holds its values
// times 1 / scale[t] as binary16. scale[t] is the power of two that brings the row's largest
// magnitude into [2^14, 2^15): no value overflows binary16's range, few fall below its normal
// range, and multiplying a product's float sum by scale[t] undoes it exactly.
struct half_acts {
    const uint16_t* data;
    int64_t stride;
    const float* scale;
};

// 64-byte aligned storage for quant_acts, k_acts and half_acts.
struct alignas(64) cache_line {
    int32_t words[16];
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
// Query heads one attend call takes at most: heads sharing a cache head (grouped-query
// attention) share each cache row's conversion.
inline constexpr int attend_heads = 8;

// n_heads query heads sharing one cache head: head h reads q + h * head_dim and writes
// out + h * head_dim.
struct attend_args {
    int32_t n_heads;
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
// Rows are applied axpy_batch_group at a time, each token's columns loaded and stored once for
// all the group's rows that list it; the scratch also holds, per token, those rows'
// coefficients for each 32-column block of the column block, and a mark.
inline constexpr int64_t axpy_batch_block = 128;
inline constexpr int64_t axpy_batch_stride = axpy_batch_block + 16;
inline constexpr int64_t axpy_batch_group = 8;
inline constexpr int64_t axpy_batch_coefs = axpy_batch_group * (axpy_batch_block / 32);
inline constexpr int64_t axpy_batch_scratch(int64_t n_tok) {
    return n_tok * (axpy_batch_stride + axpy_batch_coefs + 2);
}

struct simd_kernels {
    // y[t][r] = w[r] . x[t] for rows r in [r0, r1) and tokens t in [0, n_tok); F32 or F16 w.
    void (*mul_mat)(const weights& w, int64_t r0, int64_t r1, f32_rows x, int64_t n_tok,
                    f32_rows_out y);
    // y[rows[k]] = w[rows[k]] . x for k in [0, n); F32 or F16 w.
    void (*mul_rows)(const weights& w, const int32_t* rows, int64_t n, const float* x, float* y);
    // Neuron-major row-sparse product: for each row i in [i0, i1) and each token t in
    // tokens[offsets[i] .. offsets[i + 1]), y[t][i] = w[i] . x[t]; F32 or F16 w.
    void (*mul_rows_batch)(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                           const int32_t* tokens, f32_rows x, f32_rows_out y);
    // y[c0 .. c1) += a[rows[k]] * wt[rows[k]][c0 .. c1) for k = 0 .. n-1 in order, skipping
    // zero coefficients; every element is one FMA chain starting from its old value. Any weight
    // type; quantized rows need c0 and c1 multiples of 32. Each FMA multiplies a by the value
    // (F32, F16, and d * q + m for Q4_1 and Q5_1), except for the formats without a minimum
    // (Q4_0, Q5_0, Q8_0), where it multiplies a * d, rounded once per block, by q - o.
    void (*axpy_rows)(const weights& wt, const int32_t* rows, int64_t n, const float* a, float* y,
                      int64_t c0, int64_t c1);
    // Neuron-major column-sparse accumulate: for each row i in [0, n_rows) in order and each
    // entry e in [offsets[i], offsets[i + 1]), y[tokens[e]][c0 .. c1) += coefs[e] * wt[i][...],
    // for tokens in [0, n_tok). `scratch` holds axpy_batch_scratch(n_tok) floats. Any weight
    // type, as axpy_rows, with which each token's elements agree bit for bit.
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

    // Quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) times activations prepared for their
    // type. Every block product is exact integer arithmetic, and every output is one sequence of
    // float operations whatever the entry, tile or batch, of one of two kinds (see
    // simd_quant_impl.hpp): the dense products (mul_mat_q, for one token or a batch) convert each
    // block's int32 sum to float and add it, scaled by d_w * d_x, by one FMA; the sparse ones
    // (mul_rows_q, mul_rows_batch_q) do so per group of four codes, in eight float lanes summed
    // at the end. A token decoded alone or in a batch thus gets the same bits from each kind.
    //
    // Quantizes the `blocks` blocks of the activation row x for products with weights of
    // `type` into the quant_acts row `out` of `stride` blocks.
    void (*prepare_q)(wtype type, const float* x, int64_t blocks, int64_t stride, std::byte* out);
    // y[r] = w[r] . x for r = rows[i], i in [0, n).
    void (*mul_rows_q)(const weights& w, const int32_t* rows, int64_t n, quant_acts x, float* y);
    // y[t][r] = w[r] . x[t] for rows r in [r0, r1) and tokens t in [0, n_tok).
    void (*mul_mat_q)(const weights& w, int64_t r0, int64_t r1, quant_acts x, int64_t n_tok,
                      f32_rows_out y);
    // mul_rows_batch for quantized weights, for n_mat (1 or 2) matrices w[m] of one type and
    // shape that share the lists and x, into y[m].
    void (*mul_rows_batch_q)(const weights* w, int n_mat, int64_t i0, int64_t i1,
                             const int32_t* offsets, const int32_t* tokens, quant_acts x,
                             const f32_rows_out* y);

    // K-quant weights (Q4_K, Q6_K; simd_kquant_impl.hpp). The products read activations
    // quantized to Q8_K rows and give every output one sequence of float operations whatever the
    // entry, tile or batch, so dense and sparse products agree bit for bit, and a token gets the
    // same bits alone and in a batch.
    //
    // Quantizes the `blocks` super-blocks of the activation row x to out.
    void (*prepare_k)(const float* x, int64_t blocks, block_q8_k* out);
    // y[r] = w[r] . x for r = rows[i], i in [0, n).
    void (*mul_rows_k)(const weights& w, const int32_t* rows, int64_t n, const block_q8_k* x,
                       float* y);
    // y[t][r] = w[r] . x[t] for rows r in [r0, r1) and tokens t in [0, n_tok).
    void (*mul_mat_k)(const weights& w, int64_t r0, int64_t r1, k_acts x, int64_t n_tok,
                      f32_rows_out y);
    // mul_rows_batch for K-quant weights, n_mat (1 or 2) matrices sharing the lists and x.
    void (*mul_rows_batch_k)(const weights* w, int n_mat, int64_t i0, int64_t i1,
                             const int32_t* offsets, const int32_t* tokens, k_acts x,
                             const f32_rows_out* y);
    // axpy_rows for K-quant weights, c0 and c1 multiples of qk_k: per listed row, a * d * sc
    // (rounded once per sub-block) times each code by one FMA per element; for Q4_K the terms
    // a * dmin * m are summed per sub-block and subtracted once at the end.
    void (*axpy_rows_k)(const weights& wt, const int32_t* rows, int64_t n, const float* a, float* y,
                        int64_t c0, int64_t c1);

    // F16 weights times activations rounded to binary16 (half_acts), the products exact and
    // summed in float, four four-lane chains over 16-column steps and one more over 8-column
    // steps into the first two, the lanes summed in a fixed order, the last columns one by one;
    // the sum is then multiplied by the token's scale. One sequence per (row, token) whatever the
    // entry, so dense and sparse products agree bit for bit and a token gets the same bits alone
    // and in a batch. Null at the levels without FP16 arithmetic, which widen F16 weights to F32
    // in mul_mat, mul_rows and mul_rows_batch instead.
    //
    // Rounds the n values of the activation row x to binary16 into out and returns the row's
    // scale (half_acts).
    float (*prepare_h)(const float* x, int64_t n, uint16_t* out);
    // y[rows[k]] = w[rows[k]] . x for k in [0, n); x is one token's row of half_acts, scale its
    // scale.
    void (*mul_rows_h)(const weights& w, const int32_t* rows, int64_t n, const uint16_t* x,
                       float scale, float* y);
    // y[t][r] = w[r] . x[t] for rows r in [r0, r1) and tokens t in [0, n_tok).
    void (*mul_mat_h)(const weights& w, int64_t r0, int64_t r1, half_acts x, int64_t n_tok,
                      f32_rows_out y);
    // mul_rows_batch with x in half_acts.
    void (*mul_rows_batch_h)(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                             const int32_t* tokens, half_acts x, f32_rows_out y);

    // The weight types the products and accumulates above take, a bit 1 << wtype each; a table
    // may also leave attend, select, rms_norm, add, relu or glu null. The reference kernels run
    // what a table leaves out (the NEON tables, simd_neon_impl.hpp); the x86 tables take all.
    uint32_t weight_types;
};

// The tables of the instruction-set files; use one only when the CPU supports its set.
const simd_kernels& avx2_kernels() noexcept;
const simd_kernels& avx512_kernels() noexcept;
// AVX-512 with VNNI: the same results as avx512_kernels, bit for bit, from vpdpbusd.
const simd_kernels& avx512_vnni_kernels() noexcept;
// NEON (every AArch64 CPU), and with the dot-product extension: the same results bit for bit.
const simd_kernels& neon_kernels() noexcept;
const simd_kernels& neon_dotprod_kernels() noexcept;
// neon_dotprod_kernels plus the F16 products in FP16 arithmetic (FEAT_FP16 and FEAT_FHM: fmlal);
// every other entry gives neon_dotprod_kernels' bits.
const simd_kernels& neon_fp16_kernels() noexcept;

} // namespace pi::cpu
