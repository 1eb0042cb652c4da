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

} // namespace pi
