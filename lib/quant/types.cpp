#include "quant/types.hpp"

#include <array>
#include <bit>
#include <cstring>

namespace pi {

namespace {
constexpr std::array<type_traits, 19> table = {{
    {"F32", 1, 4},      {"F16", 1, 2},     {"Q4_0", 32, 18}, {"Q4_1", 32, 20}, {nullptr, 0, 0},
    {nullptr, 0, 0},    {"Q5_0", 32, 22},  {"Q5_1", 32, 24}, {"Q8_0", 32, 34}, {"Q8_1", 32, 40},
    {"Q2_K", 256, 84},  {"Q3_K", 256, 110}, {"Q4_K", 256, 144}, {"Q5_K", 256, 176},
    {"Q6_K", 256, 210}, {"Q8_K", 256, 292}, {"I8", 1, 1},     {"I16", 1, 2},    {"I32", 1, 4},
}};
} // namespace

type_traits traits_of(uint32_t type_id) noexcept {
    if (type_id >= table.size()) return {nullptr, 0, 0};
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
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u); // NaN
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
