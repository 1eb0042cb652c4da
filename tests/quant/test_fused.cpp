#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "quant/fused.hpp"

// The portable fused multiply-add (Windows' one) against the exact result. Where the C runtime's
// fmaf is correctly rounded (glibc) it is the oracle; mingw-w64's is not, so there the cases
// with a known answer are checked alone.
TEST_CASE("the portable fused multiply-add rounds once") {
    // (1 + 2^-13)(1 - 2^-13) = 1 - 2^-26 rounds to 1 as a float: only a fused sum keeps -2^-26.
    const float e = std::ldexp(1.0f, -13);
    CHECK(pi::fused_multiply_add_portable(1.0f + e, 1.0f - e, -1.0f) == -std::ldexp(1.0f, -26));
    // A product far below z's ulp, a tie to even, and a sum just above a tie.
    const float tiny = std::ldexp(1.0f, -60);
    CHECK(pi::fused_multiply_add_portable(tiny, tiny, 1.0f + std::ldexp(1.0f, -23)) ==
          1.0f + std::ldexp(1.0f, -23));
    CHECK(pi::fused_multiply_add_portable(1.0f, std::ldexp(1.0f, -24), 1.0f) ==
          1.0f); // tie to even
    CHECK(pi::fused_multiply_add_portable(std::ldexp(1.0f, -24) + std::ldexp(1.0f, -47), 1.0f,
                                          1.0f) == 1.0f + std::ldexp(1.0f, -23)); // above the tie
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(std::isinf(
        pi::fused_multiply_add_portable(std::ldexp(1.0f, 100), std::ldexp(1.0f, 100), 0.0f)));
    CHECK(std::isnan(pi::fused_multiply_add_portable(inf, 0.0f, 1.0f)));
#if !defined(_WIN32)
    uint32_t s = 12345;
    const auto next = [&s] {
        s = s * 1664525u + 1013904223u;
        return (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 20.0f;
    };
    int differ = 0;
    for (int i = 0; i < 1000000; ++i) {
        const float x = next(), y = next(), z = next();
        if (pi::fused_multiply_add_portable(x, y, z) != std::fma(x, y, z)) ++differ;
        const float w = -x * y; // z cancelling most of the product: the hardest sums
        if (pi::fused_multiply_add_portable(x, y, w) != std::fma(x, y, w)) ++differ;
    }
    CHECK(differ == 0);
#endif
}
