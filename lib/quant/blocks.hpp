#pragma once
// ggml's quantized block layouts (docs/quantization.md), byte for byte: these structs are what a
// GGUF file holds, so kernels may read file data through them directly.
#include <bit>
#include <cstdint>

namespace pi {

static_assert(std::endian::native == std::endian::little,
              "GGUF block layouts are little-endian; this build assumes a little-endian host");

inline constexpr int64_t qk4_0 = 32;
inline constexpr int64_t qk4_1 = 32;
inline constexpr int64_t qk5_0 = 32;
inline constexpr int64_t qk5_1 = 32;
inline constexpr int64_t qk8_0 = 32;

// x = (q - 8) * d; element j (0..15) is the low nibble of qs[j], element j + 16 the high nibble.
struct block_q4_0 {
    uint16_t d; // binary16
    uint8_t qs[qk4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18 && alignof(block_q4_0) == 2);

// x = q * d + m, nibbles as in Q4_0.
struct block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[qk4_1 / 2];
};
static_assert(sizeof(block_q4_1) == 20 && alignof(block_q4_1) == 2);

// x = (q - 16) * d; low four bits as in Q4_0, bit e of qh (a little-endian u32) is the fifth
// bit of element e.
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[qk5_0 / 2];
};
static_assert(sizeof(block_q5_0) == 22 && alignof(block_q5_0) == 2);

// x = q * d + m, bits as in Q5_0.
struct block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[qk5_1 / 2];
};
static_assert(sizeof(block_q5_1) == 24 && alignof(block_q5_1) == 2);

// x = q * d.
struct block_q8_0 {
    uint16_t d;
    int8_t qs[qk8_0];
};
static_assert(sizeof(block_q8_0) == 34 && alignof(block_q8_0) == 2);

// K-quants: super-blocks of qk_k elements split into sub-blocks that carry their own (quantized)
// scale, and for the asymmetric types a minimum; the super-block's binary16 d (and dmin) scale
// those. Field order is ggml's, which is what a file holds.
inline constexpr int64_t qk_k = 256;
inline constexpr int64_t k_scale_size = 12; // 8 six-bit scales + 8 six-bit mins (Q4_K, Q5_K)

// 16 sub-blocks of 16: x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q two bits. Each
// 128-element half uses 32 bytes of qs; bits 2k..2k+1 of qs[l] hold element 32k + l of that half.
struct block_q2_k {
    uint8_t scales[qk_k / 16];
    uint8_t qs[qk_k / 4];
    uint16_t d;
    uint16_t dmin;
};
static_assert(sizeof(block_q2_k) == 84 && alignof(block_q2_k) == 2);

// 16 sub-blocks of 16: x = d * (s - 32) * (q - 4 * !hbit), s six bits packed in scales[12], the
// low two bits of q as in Q2_K and the third bit, inverted, in hmask.
struct block_q3_k {
    uint8_t hmask[qk_k / 8];
    uint8_t qs[qk_k / 4];
    uint8_t scales[12];
    uint16_t d;
};
static_assert(sizeof(block_q3_k) == 110 && alignof(block_q3_k) == 2);

// 8 sub-blocks of 32: x = d * sc * q - dmin * m, sc and m six bits packed in scales[12]; each 64
// elements use 32 bytes of qs, low nibbles first.
struct block_q4_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[k_scale_size];
    uint8_t qs[qk_k / 2];
};
static_assert(sizeof(block_q4_k) == 144 && alignof(block_q4_k) == 2);

// As Q4_K with a fifth bit: bit 2k (low nibble) / 2k + 1 (high nibble) of qh[l] for the k-th
// group of 64.
struct block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[k_scale_size];
    uint8_t qh[qk_k / 8];
    uint8_t qs[qk_k / 2];
};
static_assert(sizeof(block_q5_k) == 176 && alignof(block_q5_k) == 2);

// 16 sub-blocks of 16: x = d * scales[s] * (q - 32), q six bits: four in ql, two in qh.
struct block_q6_k {
    uint8_t ql[qk_k / 2];
    uint8_t qh[qk_k / 4];
    int8_t scales[qk_k / 16];
    uint16_t d;
};
static_assert(sizeof(block_q6_k) == 210 && alignof(block_q6_k) == 2);

// The activation side of K-quant products: x = d * q, with the sums of each 16 q precomputed so
// the minimum terms of Q2_K/Q4_K/Q5_K cost one multiply per sub-block.
struct block_q8_k {
    float d;
    int8_t qs[qk_k];
    int16_t bsums[qk_k / 16];
};
static_assert(sizeof(block_q8_k) == 292 && alignof(block_q8_k) == 4);

} // namespace pi
