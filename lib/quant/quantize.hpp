#pragma once
// Reference quantizers and dequantizers of the ggml block formats. The quantizers reproduce
// ggml-quants.c quantize_row_*_reference bit for bit as ggml's own x86-64 build computes them
// (docs/quantization.md: the same scale search, the same float operations in the same order,
// the multiply-adds that build fuses fused, binary16 scales rounded to nearest even), checked
// against golden bytes made by that build (tests/quant/data). n is the number of floats, a
// multiple of the block size: 32, or qk_k = 256 for the K-quants.
//
// Inputs that ggml leaves undefined (NaN, or a scale whose inverse overflows) give the codes
// ggml's x86-64 build gives for the 32-element formats, without undefined behaviour here.
#include <cstdint>

#include "quant/blocks.hpp"

namespace pi {

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) noexcept;
void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n) noexcept;
void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n) noexcept;
void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n) noexcept;
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) noexcept;

// K-quants (quantize_k.cpp), without an importance matrix, as ggml's reference.
void quantize_row_q2_k(const float* x, block_q2_k* y, int64_t n) noexcept;
void quantize_row_q3_k(const float* x, block_q3_k* y, int64_t n) noexcept;
void quantize_row_q4_k(const float* x, block_q4_k* y, int64_t n) noexcept;
void quantize_row_q5_k(const float* x, block_q5_k* y, int64_t n) noexcept;
void quantize_row_q6_k(const float* x, block_q6_k* y, int64_t n) noexcept;

void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n) noexcept;
void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n) noexcept;
void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n) noexcept;
void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n) noexcept;
void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n) noexcept;

// K-quants: n is a multiple of qk_k (256).
void dequantize_row_q2_k(const block_q2_k* x, float* y, int64_t n) noexcept;
void dequantize_row_q3_k(const block_q3_k* x, float* y, int64_t n) noexcept;
void dequantize_row_q4_k(const block_q4_k* x, float* y, int64_t n) noexcept;
void dequantize_row_q5_k(const block_q5_k* x, float* y, int64_t n) noexcept;
void dequantize_row_q6_k(const block_q6_k* x, float* y, int64_t n) noexcept;

} // namespace pi
