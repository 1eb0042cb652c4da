#pragma once
// x * y + z rounded once, as the quantizers need it to write ggml's bytes (quantize.cpp).
// std::fma where the C runtime's fmaf is correctly rounded; mingw-w64's is not (it rounds the
// product first, so about a third of random inputs differ), so Windows gets a portable one: the
// float product is exact in double, the double sum is rounded to odd, and odd-rounded double
// to float is then correctly rounded (53 >= 2 * 24 + 2 bits).
#include <cmath>
#include <cstdint>
#include <cstring>

namespace pi {

inline float fused_multiply_add_portable(float x, float y, float z) noexcept {
    const double p = static_cast<double>(x) * static_cast<double>(y); // exact
    const double c = static_cast<double>(z);
    double s = p + c;
    if (!std::isfinite(s)) return static_cast<float>(s);
    const double v = s - p; // two-sum: s + e == p + c exactly
    const double e = (p - (s - v)) + (c - v);
    if (e != 0) {
        uint64_t bits;
        std::memcpy(&bits, &s, sizeof bits);
        if ((bits & 1) == 0) {
            // Even and inexact: step to the odd neighbour on the side of the exact sum.
            bits = (e > 0) == (s > 0) ? bits + 1 : bits - 1;
            std::memcpy(&s, &bits, sizeof s);
        }
    }
    return static_cast<float>(s);
}

inline float fused_multiply_add(float x, float y, float z) noexcept {
#if defined(_WIN32) && !defined(_MSC_VER)
    return fused_multiply_add_portable(x, y, z);
#else
    return std::fma(x, y, z);
#endif
}

} // namespace pi
