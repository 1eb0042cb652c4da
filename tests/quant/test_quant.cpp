// The ggml type table (docs/quantization.md) and the F16 <-> F32 conversions, checked
// exhaustively against the IEEE binary16 definition.
#include "quant/types.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <ios>
#include <limits>

using pi::fp16_to_fp32;
using pi::fp32_to_fp16;

namespace {

bool half_is_nan(uint16_t h) {
    return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0;
}

// The value of a non-NaN half from its fields: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m.
double half_value(uint16_t h) {
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    const double sign = (h & 0x8000u) ? -1.0 : 1.0;
    if (exp == 0x1f) return sign * std::numeric_limits<double>::infinity();
    if (exp == 0) return sign * std::ldexp(mant, -24);
    return sign * std::ldexp(1024 + mant, exp - 25);
}

} // namespace

TEST_CASE("fp16_to_fp32 gives the exact value of every half") {
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const auto hh = static_cast<uint16_t>(h);
        const float f = fp16_to_fp32(hh);
        if (half_is_nan(hh)) {
            CHECK(std::isnan(f));
            continue;
        }
        if (static_cast<double>(f) != half_value(hh)) {
            INFO("half 0x" << std::hex << h);
            CHECK(static_cast<double>(f) == half_value(hh));
        }
        CHECK(std::signbit(f) == ((h & 0x8000u) != 0));
    }
    CHECK(fp16_to_fp32(0x3c00) == 1.0f);
    CHECK(fp16_to_fp32(0xc000) == -2.0f);
    CHECK(fp16_to_fp32(0x7bff) == 65504.0f);
    CHECK(fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(fp16_to_fp32(0x0400) == std::ldexp(1.0f, -14));
    CHECK(fp16_to_fp32(0x7c00) == std::numeric_limits<float>::infinity());
    CHECK(fp16_to_fp32(0xfc00) == -std::numeric_limits<float>::infinity());
}

TEST_CASE("every half survives fp16 -> fp32 -> fp16 unchanged, and NaN stays NaN") {
    int mismatches = 0;
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const auto hh = static_cast<uint16_t>(h);
        const uint16_t back = fp32_to_fp16(fp16_to_fp32(hh));
        const bool ok = half_is_nan(hh) ? half_is_nan(back) : back == hh;
        if (!ok && mismatches++ == 0) {
            INFO("half 0x" << std::hex << h << " came back as 0x" << back);
            CHECK(ok);
        }
    }
    CHECK(mismatches == 0);
    CHECK(half_is_nan(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(half_is_nan(fp32_to_fp16(-std::numeric_limits<float>::quiet_NaN())));
    CHECK(half_is_nan(fp32_to_fp16(std::bit_cast<float>(0x7f800001u)))); // signalling, tiny payload
}

TEST_CASE("fp32_to_fp16 rounds to nearest with ties to even, in normal and subnormal range") {
    int mismatches = 0;
    // For every pair of adjacent finite positive halves: the midpoint goes to the even one, a
    // float just below it to the lower, just above it to the upper (also for negatives).
    for (uint16_t lo = 0; lo < 0x7bff; ++lo) {
        const auto hi = static_cast<uint16_t>(lo + 1);
        const float mid = static_cast<float>((half_value(lo) + half_value(hi)) / 2);
        const uint16_t even = (lo & 1) == 0 ? lo : hi;
        const float inf = std::numeric_limits<float>::infinity();
        const bool ok = fp32_to_fp16(mid) == even &&
                        fp32_to_fp16(std::nextafter(mid, 0.0f)) == lo &&
                        fp32_to_fp16(std::nextafter(mid, inf)) == hi &&
                        fp32_to_fp16(-mid) == (even | 0x8000u) &&
                        fp32_to_fp16(-std::nextafter(mid, 0.0f)) == (lo | 0x8000u);
        if (!ok && mismatches++ == 0) {
            INFO("between halves 0x" << std::hex << lo << " and 0x" << hi);
            CHECK(ok);
        }
    }
    CHECK(mismatches == 0);
    CHECK(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);     // tie, 1.0 is even
    CHECK(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02); // tie, goes up to even
}

TEST_CASE("fp32_to_fp16 handles subnormals, underflow to signed zero and overflow to inf") {
    CHECK(fp32_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);
    CHECK(fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);    // tie between 0 and 2^-24
    CHECK(fp32_to_fp16(std::ldexp(1.5f, -24)) == 0x0002);    // tie between 1 and 2 ulps
    CHECK(fp32_to_fp16(std::ldexp(1023.5f, -24)) == 0x0400); // largest subnormal rounds up
    CHECK(fp32_to_fp16(std::ldexp(1.0f, -14)) == 0x0400);    // smallest normal
    CHECK(fp32_to_fp16(1e-10f) == 0x0000);
    CHECK(fp32_to_fp16(-1e-10f) == 0x8000);
    CHECK(fp32_to_fp16(-0.0f) == 0x8000);
    CHECK(fp32_to_fp16(std::numeric_limits<float>::denorm_min()) == 0x0000);
    CHECK(fp32_to_fp16(65504.0f) == 0x7bff);
    CHECK(fp32_to_fp16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
    CHECK(fp32_to_fp16(65520.0f) == 0x7c00); // tie past the largest half goes to inf
    CHECK(fp32_to_fp16(1e6f) == 0x7c00);
    CHECK(fp32_to_fp16(-1e6f) == 0xfc00);
    CHECK(fp32_to_fp16(std::numeric_limits<float>::max()) == 0x7c00);
    CHECK(fp32_to_fp16(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(fp32_to_fp16(-std::numeric_limits<float>::infinity()) == 0xfc00);
}

TEST_CASE("the type table matches the ggml ids, block sizes and block bytes of spec 1.4") {
    struct row {
        uint32_t id;
        const char* name;
        uint32_t block, bytes;
    };
    const row rows[] = {
        {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
        {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
        {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 40},    {10, "Q2_K", 256, 84},
        {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
        {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {16, "I8", 1, 1},
        {17, "I16", 1, 2},      {18, "I32", 1, 4},
    };
    for (const row& r : rows) {
        CAPTURE(r.id);
        const pi::type_traits t = pi::traits_of(r.id);
        REQUIRE(t.name != nullptr);
        CHECK(std::strcmp(t.name, r.name) == 0);
        CHECK(t.block_size == r.block);
        CHECK(t.type_size == r.bytes);
    }
    for (uint32_t removed : {4u, 5u, 19u, 1000u, 0xffffffffu}) {
        CAPTURE(removed);
        CHECK(pi::traits_of(removed).name == nullptr);
    }
    CHECK(pi::traits_of(pi::ggml_type::q4_0).type_size == 18);
    CHECK(pi::row_bytes(pi::ggml_type::q4_0, 64) == 36);
    CHECK(pi::row_bytes(pi::ggml_type::q6_k, 512) == 420);
    CHECK(pi::row_bytes(pi::ggml_type::f16, 7) == 14);
    CHECK(pi::row_bytes(pi::ggml_type::f32, 0) == 0);
}
