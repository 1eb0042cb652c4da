#include "quant/types.hpp"

#include <array>
#include <bit>
#include <cstring>

#include "quant/quantize.hpp"

namespace pi {

namespace {

void f32_to_float(const void* src, float* dst, int64_t n) noexcept {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void f32_from_float(const float* src, void* dst, int64_t n) noexcept {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void f16_to_float(const void* src, float* dst, int64_t n) noexcept {
    const auto* bytes = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, sizeof h);
        dst[i] = fp16_to_fp32(h);
    }
}
void f16_from_float(const float* src, void* dst, int64_t n) noexcept {
    auto* bytes = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(bytes + 2 * i, &h, sizeof h);
    }
}

// Block formats go through an aligned local block, so file bytes at any offset are fine.
template <typename Block, void (*Dequantize)(const Block*, float*, int64_t) noexcept,
          int64_t qk = 32>
void blocks_to_float(const void* src, float* dst, int64_t n) noexcept {
    const auto* bytes = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / qk; ++i) {
        Block b;
        std::memcpy(&b, bytes + i * sizeof(Block), sizeof(Block));
        Dequantize(&b, dst + i * qk, qk);
    }
}
template <typename Block, void (*Quantize)(const float*, Block*, int64_t) noexcept, int64_t qk = 32>
void blocks_from_float(const float* src, void* dst, int64_t n) noexcept {
    auto* bytes = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n / qk; ++i) {
        Block b;
        Quantize(src + i * qk, &b, qk);
        std::memcpy(bytes + i * sizeof(Block), &b, sizeof(Block));
    }
}

template <typename Block, void (*Quantize)(const float*, Block*, int64_t) noexcept,
          void (*Dequantize)(const Block*, float*, int64_t) noexcept>
constexpr type_traits block_type(const char* name) {
    return {name, 32, sizeof(Block), &blocks_to_float<Block, Dequantize>,
            &blocks_from_float<Block, Quantize>};
}

// A K-quant super-block type.
template <typename Block, void (*Quantize)(const float*, Block*, int64_t) noexcept,
          void (*Dequantize)(const Block*, float*, int64_t) noexcept>
constexpr type_traits k_type(const char* name) {
    return {name, qk_k, sizeof(Block), &blocks_to_float<Block, Dequantize, qk_k>,
            &blocks_from_float<Block, Quantize, qk_k>};
}

constexpr type_traits plain(const char* name, uint32_t block, uint32_t bytes) {
    return {name, block, bytes, nullptr, nullptr};
}

constexpr type_traits none = plain(nullptr, 0, 0);

constexpr std::array<type_traits, 19> table = {{
    {"F32", 1, 4, &f32_to_float, &f32_from_float},
    {"F16", 1, 2, &f16_to_float, &f16_from_float},
    block_type<block_q4_0, quantize_row_q4_0, dequantize_row_q4_0>("Q4_0"),
    block_type<block_q4_1, quantize_row_q4_1, dequantize_row_q4_1>("Q4_1"),
    none,
    none,
    block_type<block_q5_0, quantize_row_q5_0, dequantize_row_q5_0>("Q5_0"),
    block_type<block_q5_1, quantize_row_q5_1, dequantize_row_q5_1>("Q5_1"),
    block_type<block_q8_0, quantize_row_q8_0, dequantize_row_q8_0>("Q8_0"),
    plain("Q8_1", 32, 40),
    k_type<block_q2_k, quantize_row_q2_k, dequantize_row_q2_k>("Q2_K"),
    k_type<block_q3_k, quantize_row_q3_k, dequantize_row_q3_k>("Q3_K"),
    k_type<block_q4_k, quantize_row_q4_k, dequantize_row_q4_k>("Q4_K"),
    k_type<block_q5_k, quantize_row_q5_k, dequantize_row_q5_k>("Q5_K"),
    k_type<block_q6_k, quantize_row_q6_k, dequantize_row_q6_k>("Q6_K"),
    plain("Q8_K", 256, 292),
    plain("I8", 1, 1),
    plain("I16", 1, 2),
    plain("I32", 1, 4),
}};

bool sizes_match(const type_traits& tt, size_t n_floats, size_t n_bytes) noexcept {
    return tt.block_size != 0 && n_floats % tt.block_size == 0 &&
           n_bytes == n_floats / tt.block_size * tt.type_size;
}

} // namespace

bool quantize_row(ggml_type type, std::span<const float> src, std::span<uint8_t> dst) noexcept {
    const type_traits tt = traits_of(type);
    if (!tt.from_float || !sizes_match(tt, src.size(), dst.size())) return false;
    tt.from_float(src.data(), dst.data(), static_cast<int64_t>(src.size()));
    return true;
}

bool dequantize_row(ggml_type type, std::span<const uint8_t> src, std::span<float> dst) noexcept {
    const type_traits tt = traits_of(type);
    if (!tt.to_float || !sizes_match(tt, dst.size(), src.size())) return false;
    tt.to_float(src.data(), dst.data(), static_cast<int64_t>(dst.size()));
    return true;
}

type_traits traits_of(uint32_t type_id) noexcept {
    if (type_id >= table.size()) return none;
    return table[type_id];
}

float fp16_to_fp32(uint16_t h) noexcept {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) noexcept {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // overflow to inf
    if (abs < 0x38800000u) {
        // Subnormal half (or zero): add the magic that aligns the mantissa, round to nearest even.
        const float magic = std::bit_cast<float>(0x3f000000u); // 0.5
        const float v = std::bit_cast<float>(abs) + magic;
        return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(v) - 0x3f000000u));
    }
    const uint32_t mant_odd = (abs >> 13) & 1u;
    const uint32_t rounded = abs + 0xc8000fffu + mant_odd; // rebias exponent and round
    return static_cast<uint16_t>(sign | (rounded >> 13));
}

} // namespace pi
