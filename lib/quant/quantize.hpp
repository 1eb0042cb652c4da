#pragma once
// Reference quantizers and dequantizers of the ggml block formats. The quantizers reproduce
// ggml-quants.c quantize_row_*_reference bit for bit (and so gguf-py's gguf.quants): the same
// scale choice, the same float operations in the same order, each rounded to float, and
// binary16 scales rounded to nearest even. n is the number of floats, a multiple of 32.
//
// Inputs that ggml leaves undefined (NaN, or a scale whose inverse overflows) quantize to the
// nearest end of the code range instead of invoking undefined behaviour.
#include <cstdint>

#include "quant/blocks.hpp"

namespace pi {

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) noexcept;
void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n) noexcept;
void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n) noexcept;
void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n) noexcept;
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) noexcept;

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
