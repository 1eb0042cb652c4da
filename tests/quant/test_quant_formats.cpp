// The ggml block formats (docs/quantization.md): hand-computed blocks for every format, including
// codes that fall exactly on .5 boundaries, all-zero blocks and scales beyond the binary16 range;
// the dequantizers on those blocks; the table dispatch; and round-trip error bounds on random
// data.
// (quant_gguf_py_crosscheck compares the same code with gguf-py on 4096 blocks per format.)
#include "quant/blocks.hpp"
#include "quant/quantize.hpp"
#include "quant/types.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

using pi::ggml_type;

namespace {

using bytes = std::vector<uint8_t>;

std::vector<float> ramp(float start, float step) {
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j)
        x[j] = start + step * static_cast<float>(j);
    return x;
}

std::vector<float> block_of(std::initializer_list<float> head, float rest) {
    std::vector<float> x(head);
    x.resize(32, rest);
    return x;
}

bytes quantize(ggml_type t, const std::vector<float>& x) {
    bytes out(pi::row_bytes(t, static_cast<int64_t>(x.size())));
    REQUIRE(pi::quantize_row(t, x, out));
    return out;
}

std::vector<float> dequantize(ggml_type t, const bytes& b, size_t n = 32) {
    std::vector<float> out(n);
    REQUIRE(pi::dequantize_row(t, b, out));
    return out;
}

// n copies of one byte after a prefix, for the long uniform tails of the expected blocks.
bytes with_tail(bytes prefix, size_t total, uint8_t fill) {
    prefix.resize(total, fill);
    return prefix;
}

} // namespace

TEST_CASE("block structs have ggml's sizes and the table's block sizes") {
    CHECK(sizeof(pi::block_q4_0) == pi::traits_of(ggml_type::q4_0).type_size);
    CHECK(sizeof(pi::block_q4_1) == pi::traits_of(ggml_type::q4_1).type_size);
    CHECK(sizeof(pi::block_q5_0) == pi::traits_of(ggml_type::q5_0).type_size);
    CHECK(sizeof(pi::block_q5_1) == pi::traits_of(ggml_type::q5_1).type_size);
    CHECK(sizeof(pi::block_q8_0) == pi::traits_of(ggml_type::q8_0).type_size);
    CHECK(offsetof(pi::block_q5_1, qh) == 4);
    CHECK(offsetof(pi::block_q5_1, qs) == 8);
}

// Q4_0: d = max / -8 with max the signed value of largest magnitude, q = min(15, trunc(x/d + 8.5)).
TEST_CASE("Q4_0 quantizes hand-computed blocks exactly") {
    // x = j - 16: max = -16, d = 2, x*id + 8.5 = j/2 + 0.5, so q = trunc(j/2 + 0.5): the odd j
    // land on .5 + .5 = integer and the even j on .5, truncated down; q(31) = 16 clips to 15.
    const bytes ramp_qs = {0x80, 0x91, 0x91, 0xA2, 0xA2, 0xB3, 0xB3, 0xC4,
                           0xC4, 0xD5, 0xD5, 0xE6, 0xE6, 0xF7, 0xF7, 0xF8};
    bytes expected = {0x00, 0x40}; // d = +2.0
    expected.insert(expected.end(), ramp_qs.begin(), ramp_qs.end());
    CHECK(quantize(ggml_type::q4_0, ramp(-16, 1)) == expected);

    // Mirrored: max = +16, so d = -2 and the codes are the same.
    expected[1] = 0xC0;
    CHECK(quantize(ggml_type::q4_0, ramp(16, -1)) == expected);

    // +4 and -4 tie for the largest magnitude: the first wins. max = 4, d = -0.5; 4 -> code 0,
    // -4 -> 16.5 -> 16 -> clipped to 15; zeros -> 8.
    CHECK(quantize(ggml_type::q4_0, block_of({4, -4}, 0)) ==
          with_tail({0x00, 0xB8, 0x80, 0x8F}, 18, 0x88));
    CHECK(quantize(ggml_type::q4_0, block_of({-4, 4}, 0)) ==
          with_tail({0x00, 0x38, 0x80, 0x8F}, 18, 0x88));

    // All zeros: max stays +0.0, d = 0 / -8 = -0.0 (binary16 0x8000), id = 0, every code 8.
    CHECK(quantize(ggml_type::q4_0, block_of({}, 0.0f)) == with_tail({0x00, 0x80}, 18, 0x88));
    CHECK(quantize(ggml_type::q4_0, block_of({}, -0.0f)) == with_tail({0x00, 0x80}, 18, 0x88));

    // The largest half: d = -8188 = 0xEFFF exactly; the ones fall just below 8.5 -> 8.
    CHECK(quantize(ggml_type::q4_0, block_of({65504}, 1)) ==
          with_tail({0xFF, 0xEF, 0x80}, 18, 0x88));
    // Beyond binary16: d = -1.25e29 stores as -inf (as in ggml); the codes still use the float d.
    CHECK(quantize(ggml_type::q4_0, block_of({1e30f}, 1)) ==
          with_tail({0x00, 0xFC, 0x80}, 18, 0x88));
}

// Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min)/d + 0.5)).
TEST_CASE("Q4_1 quantizes hand-computed blocks exactly") {
    // x = -1 + j/4 for j < 31, x[31] = 0: min -1, max 6.5, d = 0.5, (x - min)*id = j/2, so odd j
    // sit exactly on .5 and round up; x[31] = 0 -> 2.
    std::vector<float> x = ramp(-1, 0.25f);
    x[31] = 0;
    const bytes expected = {0x00, 0x38, 0x00, 0xBC, // d = 0.5, m = -1
                            0x80, 0x91, 0x91, 0xA2, 0xA2, 0xB3, 0xB3, 0xC4,
                            0xC4, 0xD5, 0xD5, 0xE6, 0xE6, 0xF7, 0xF7, 0x28};
    CHECK(quantize(ggml_type::q4_1, x) == expected);

    // All zeros: d = 0, m = 0, codes trunc(0.5) = 0.
    CHECK(quantize(ggml_type::q4_1, block_of({}, 0)) == bytes(20, 0x00));

    // max - min = 2e30: d overflows binary16 to +inf and m to -inf, as in ggml.
    CHECK(quantize(ggml_type::q4_1, block_of({1e30f, -1e30f}, 0)) ==
          with_tail({0x00, 0x7C, 0x00, 0xFC, 0x8F, 0x80}, 20, 0x88));
}

// Q5_0: d = max / -16, q = min(31, trunc(x/d + 16.5)), fifth bits in qh.
TEST_CASE("Q5_0 quantizes hand-computed blocks exactly, fifth bits into qh") {
    // x = j - 16: d = 1, q = trunc(j + 0.5) = j. Low nibbles of j and j + 16 agree, so
    // qs[j] = j * 0x11; the fifth bit is set for elements 16..31: qh = 0xFFFF0000.
    bytes expected = {0x00, 0x3C, 0x00, 0x00, 0xFF, 0xFF};
    for (int j = 0; j < 16; ++j)
        expected.push_back(static_cast<uint8_t>(j * 0x11));
    CHECK(quantize(ggml_type::q5_0, ramp(-16, 1)) == expected);
    expected[1] = 0xBC; // mirrored: d = -1, same codes
    CHECK(quantize(ggml_type::q5_0, ramp(16, -1)) == expected);

    // Element 3 alone has the high bit: x = [-16, 0 x 31] except x[3] = 15 -> code 31.
    std::vector<float> x = block_of({-16}, 0);
    x[3] = 15;
    // codes: x[0] -> 0, zeros -> 16 (only the fifth bit), x[3] -> 31
    bytes one = {0x00, 0x3C, 0xFE, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x0F};
    CHECK(quantize(ggml_type::q5_0, x) == with_tail(one, 22, 0x00));

    // All zeros: d = -0.0, every code 16: low nibbles 0, all fifth bits set.
    CHECK(quantize(ggml_type::q5_0, block_of({}, 0)) ==
          with_tail({0x00, 0x80, 0xFF, 0xFF, 0xFF, 0xFF}, 22, 0x00));
}

// Q5_1: d = (max - min) / 31, m = min, q = min(31, trunc((x - min)/d + 0.5)).
TEST_CASE("Q5_1 quantizes hand-computed blocks exactly") {
    // x = -1 + j/4: d = 0.25, m = -1, q = j.
    bytes expected = {0x00, 0x34, 0x00, 0xBC, 0x00, 0x00, 0xFF, 0xFF};
    for (int j = 0; j < 16; ++j)
        expected.push_back(static_cast<uint8_t>(j * 0x11));
    CHECK(quantize(ggml_type::q5_1, ramp(-1, 0.25f)) == expected);
    CHECK(quantize(ggml_type::q5_1, block_of({}, 0)) == bytes(24, 0x00));
}

// Q8_0: d = amax / 127, q = roundf(x / d) (halves away from zero).
TEST_CASE("Q8_0 quantizes hand-computed blocks exactly, halves away from zero") {
    // amax = 127: d = 1 and every code is roundf(x).
    const std::vector<float> halves =
        block_of({127, -0.5f, 0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f}, 0);
    CHECK(quantize(ggml_type::q8_0, halves) ==
          with_tail({0x00, 0x3C, 0x7F, 0xFF, 0x01, 0x02, 0xFE, 0x03, 0xFD, 0x7F, 0x81}, 34, 0x00));
    // amax from a negative value: d = 2; 3 -> 1.5 -> 2, -3 -> -2, 1 -> 0.5 -> 1.
    CHECK(quantize(ggml_type::q8_0, block_of({-254, 3, -3, 1, -1}, 0)) ==
          with_tail({0x00, 0x40, 0x81, 0x02, 0xFE, 0x01, 0xFF}, 34, 0x00));
    // d = 65504 / 127 = 515.78 rounds to the half 516 (0x6008).
    CHECK(quantize(ggml_type::q8_0, block_of({65504, -65504}, 1)) ==
          with_tail({0x08, 0x60, 0x7F, 0x81}, 34, 0x00));
    // d = 1e30 / 127 overflows binary16 to +inf, as in ggml.
    CHECK(quantize(ggml_type::q8_0, block_of({1e30f}, 1)) ==
          with_tail({0x00, 0x7C, 0x7F}, 34, 0x00));
    CHECK(quantize(ggml_type::q8_0, block_of({}, 0)) == bytes(34, 0x00));
}

TEST_CASE("dequantizers decode hand-written blocks exactly") {
    SUBCASE("Q4_0: (q - 8) * d") {
        const bytes b = with_tail({0x00, 0x40, 0x80, 0x91}, 18, 0x88);
        const std::vector<float> y = dequantize(ggml_type::q4_0, b);
        CHECK(y[0] == -16.0f); // low nibble 0
        CHECK(y[16] == 0.0f);  // high nibble 8
        CHECK(y[1] == -14.0f);
        CHECK(y[17] == 2.0f);
        CHECK(y[15] == 0.0f);
    }
    SUBCASE("Q4_1: q * d + m") {
        const bytes b = with_tail({0x00, 0x38, 0x00, 0xBC, 0xF0}, 20, 0x00);
        const std::vector<float> y = dequantize(ggml_type::q4_1, b);
        CHECK(y[0] == -1.0f);
        CHECK(y[16] == 6.5f);
        CHECK(y[31] == -1.0f);
    }
    SUBCASE("Q5_0 and Q5_1 reproduce their ramps exactly") {
        CHECK(dequantize(ggml_type::q5_0, quantize(ggml_type::q5_0, ramp(-16, 1))) == ramp(-16, 1));
        CHECK(dequantize(ggml_type::q5_1, quantize(ggml_type::q5_1, ramp(-1, 0.25f))) ==
              ramp(-1, 0.25f));
        // qh bit e is element e's fifth bit, whatever the nibble
        const bytes b = with_tail({0x00, 0x3C, 0x01, 0x00, 0x01, 0x80}, 22, 0x00);
        const std::vector<float> y = dequantize(ggml_type::q5_0, b);
        CHECK(y[0] == 0.0f);   // 16 - 16
        CHECK(y[1] == -16.0f); // 0 - 16
        CHECK(y[16] == 0.0f);  // bit 16
        CHECK(y[31] == 0.0f);  // bit 31
        CHECK(y[30] == -16.0f);
    }
    SUBCASE("Q8_0: q * d") {
        const bytes b = with_tail({0x00, 0xC0, 0x7F, 0x81, 0x01}, 34, 0x00);
        const std::vector<float> y = dequantize(ggml_type::q8_0, b);
        CHECK(y[0] == -254.0f);
        CHECK(y[1] == 254.0f);
        CHECK(y[2] == -2.0f);
        CHECK(y[3] == 0.0f);
    }
}

TEST_CASE("the table dispatches exactly the formats that have converters, with checked sizes") {
    for (ggml_type t : {ggml_type::f32, ggml_type::f16, ggml_type::q4_0, ggml_type::q4_1,
                        ggml_type::q5_0, ggml_type::q5_1, ggml_type::q8_0}) {
        CAPTURE(std::string(pi::traits_of(t).name));
        CHECK((pi::traits_of(t).to_float != nullptr));
        CHECK((pi::traits_of(t).from_float != nullptr));
    }
    for (ggml_type t : {ggml_type::q2_k, ggml_type::q3_k, ggml_type::q4_k, ggml_type::q5_k,
                        ggml_type::q6_k}) {
        CAPTURE(std::string(pi::traits_of(t).name));
        CHECK((pi::traits_of(t).to_float != nullptr));
        CHECK((pi::traits_of(t).from_float != nullptr));
        CHECK(pi::traits_of(t).block_size == 256);
        bytes b(pi::row_bytes(t, 512));
        std::vector<float> y(512);
        CHECK(pi::dequantize_row(t, b, y));
        CHECK_FALSE(pi::dequantize_row(t, b, std::span<float>(y).first(256)));
        CHECK_FALSE(pi::dequantize_row(t, std::span<const uint8_t>(b).first(b.size() - 1), y));
    }
    for (ggml_type t : {ggml_type::q8_1, ggml_type::q8_k, ggml_type::i8, ggml_type::i32}) {
        CAPTURE(std::string(pi::traits_of(t).name));
        CHECK((pi::traits_of(t).to_float == nullptr));
        std::vector<float> x(256, 1.0f);
        bytes out(pi::row_bytes(t, 256));
        CHECK_FALSE(pi::quantize_row(t, x, out));
        CHECK_FALSE(pi::dequantize_row(t, out, x));
    }
    CHECK((pi::traits_of(4).to_float == nullptr));

    std::vector<float> x(64, 1.0f);
    bytes q(36);
    CHECK_FALSE(
        pi::quantize_row(ggml_type::q4_0, std::span<const float>(x).first(48), q)); // 48 % 32
    CHECK_FALSE(pi::quantize_row(ggml_type::q4_0, x, std::span<uint8_t>(q).first(35)));
    CHECK(pi::quantize_row(ggml_type::q4_0, x, q));
    CHECK_FALSE(pi::dequantize_row(ggml_type::q4_0, q, std::span<float>(x).first(32)));

    // The typed function and the table agree.
    const std::vector<float> r = ramp(-3, 0.37f);
    pi::block_q5_1 b;
    pi::quantize_row_q5_1(r.data(), &b, 32);
    bytes via_table = quantize(ggml_type::q5_1, r);
    CHECK(std::memcmp(&b, via_table.data(), sizeof b) == 0);

    // F16 and F32 rows: binary16 rounding, and an exact copy.
    const std::vector<float> v = {1.0f, 1.0f + std::ldexp(1.0f, -11), -65504.0f, 0.1f};
    const std::vector<float> h = dequantize(ggml_type::f16, quantize(ggml_type::f16, v), 4);
    CHECK(h == std::vector<float>{1.0f, 1.0f, -65504.0f, pi::fp16_to_fp32(pi::fp32_to_fp16(0.1f))});
    CHECK(dequantize(ggml_type::f32, quantize(ggml_type::f32, v), 4) == v);
}

TEST_CASE("rows may sit at any byte offset, as tensor data in a file may") {
    const std::vector<float> x = ramp(-2.5f, 0.21f);
    for (ggml_type t : {ggml_type::f16, ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0,
                        ggml_type::q5_1, ggml_type::q8_0}) {
        CAPTURE(std::string(pi::traits_of(t).name));
        const bytes aligned = quantize(t, x);
        bytes shifted(aligned.size() + 1);
        REQUIRE(pi::quantize_row(t, x, std::span<uint8_t>(shifted).subspan(1)));
        CHECK(bytes(shifted.begin() + 1, shifted.end()) == aligned);
        std::vector<float> back(32);
        REQUIRE(pi::dequantize_row(t, std::span<const uint8_t>(shifted).subspan(1), back));
        CHECK(back == dequantize(t, aligned));
    }
}

TEST_CASE("inputs ggml leaves undefined quantize to valid codes without undefined behaviour") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    // A scale so small that 1/d overflows, a NaN, and an infinity.
    for (const std::vector<float>& x :
         {block_of({1e-39f, -2e-39f}, 0), block_of({nan, 1}, 2), block_of({inf, 1}, -1)}) {
        for (ggml_type t : {ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1,
                            ggml_type::q8_0}) {
            CAPTURE(std::string(pi::traits_of(t).name));
            const bytes q = quantize(t, x);
            CHECK(q.size() == pi::traits_of(t).type_size);
        }
    }
}

// Relative RMSE = sqrt(sum (x - x')^2 / sum x^2) over 64k N(0, 1) values; the bounds sit about
// 20% above what the reference quantizers give (F16 2.1e-4, Q8_0 0.0054, Q5_1 0.038,
// Q5_0 0.043, Q4_1 0.079, Q4_0 0.086). Per element, rounding costs at most half a step d,
// the symmetric formats' clipped extreme (code 16 or 32 -> 15 or 31) a whole step, and storing
// d (and m) as binary16 up to q_max * 2^-11 steps more.
TEST_CASE("round trips on Gaussian data stay within each format's error bound") {
    struct bound {
        ggml_type type;
        double rel_rmse;
        double
            max_err_in_steps; // largest |x - x'| in units of the block's |d|; 0: not a block format
    };
    const bound bounds[] = {
        {ggml_type::f16, 2.5e-4, 0},    {ggml_type::q8_0, 0.0065, 0.57},
        {ggml_type::q5_1, 0.045, 0.53}, {ggml_type::q5_0, 0.05, 1.01},
        {ggml_type::q4_1, 0.095, 0.52}, {ggml_type::q4_0, 0.105, 1.01},
    };
    std::mt19937 rng(1234);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    constexpr int64_t n = 1 << 16;
    std::vector<float> x(n);
    for (float& v : x)
        v = gauss(rng);
    for (const bound& b : bounds) {
        const std::string name = pi::traits_of(b.type).name;
        CAPTURE(name);
        const bytes q = quantize(b.type, x);
        const std::vector<float> y = dequantize(b.type, q, n);
        double err2 = 0, ref2 = 0;
        for (int64_t i = 0; i < n; ++i) {
            err2 += double(x[i] - y[i]) * (x[i] - y[i]);
            ref2 += double(x[i]) * x[i];
        }
        const double rel = std::sqrt(err2 / ref2);
        CHECK(rel < b.rel_rmse);
        if (b.max_err_in_steps == 0) continue;
        // |d| of each block, read back from the block's first two bytes.
        const size_t bsize = pi::traits_of(b.type).type_size;
        double worst = 0;
        for (int64_t blk = 0; blk < n / 32; ++blk) {
            uint16_t dh;
            std::memcpy(&dh, q.data() + blk * bsize, 2);
            const double d = std::fabs(pi::fp16_to_fp32(dh));
            for (int64_t j = blk * 32; j < blk * 32 + 32; ++j)
                worst = std::max(worst, std::fabs(double(x[j]) - y[j]) / d);
        }
        CHECK(worst < b.max_err_in_steps);
    }
}

namespace {

// The generator check_quants_with_gguf_py.py runs too: splitmix64.
uint64_t splitmix64(uint64_t& state) {
    uint64_t z = state += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// `blocks` blocks of random bytes whose binary16 scales, at the byte offsets `halves`, are
// replaced by finite values of any sign (zero and subnormals included).
bytes random_k_blocks(size_t type_size, std::initializer_list<size_t> halves, uint64_t seed,
                      size_t blocks) {
    bytes out(type_size * blocks);
    uint64_t state = seed;
    for (size_t b = 0; b < blocks; ++b) {
        uint8_t* blk = out.data() + b * type_size;
        for (size_t i = 0; i < type_size; ++i)
            blk[i] = static_cast<uint8_t>(splitmix64(state) & 0xff);
        for (size_t off : halves) {
            const uint64_t r = splitmix64(state);
            const uint64_t h = (r & 0x8000) | ((r >> 8) % 31) << 10 | ((r >> 16) & 0x3ff);
            blk[off] = static_cast<uint8_t>(h & 0xff);
            blk[off + 1] = static_cast<uint8_t>(h >> 8);
        }
    }
    return out;
}

uint64_t fnv1a(const std::vector<float>& y) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (float v : y)
        h = (h ^ std::bit_cast<uint32_t>(v)) * 0x100000001B3ull;
    return h;
}

struct k_golden {
    ggml_type type;
    uint64_t hash;
};

} // namespace

TEST_CASE("K-quant dequantization matches gguf-py on random blocks, bit for bit") {
    // gguf.quants.dequantize of the same blocks hashes to these (check_quants_with_gguf_py.py
    // recomputes them with gguf-py and reads them from here); seeds 1000 + i, 64 blocks each.
    constexpr k_golden golden[] = {
        {ggml_type::q2_k, 0xca25aeb9366272fcull}, {ggml_type::q3_k, 0x06a46f6e61bb3565ull},
        {ggml_type::q4_k, 0x231913058ed0ed88ull}, {ggml_type::q5_k, 0x7ba7bfa73efc3e2bull},
        {ggml_type::q6_k, 0xa4f214a0b0533701ull},
    };
    const std::initializer_list<size_t> halves[] = {{80, 82}, {108}, {0, 2}, {0, 2}, {208}};
    for (size_t i = 0; i < std::size(golden); ++i) {
        const pi::type_traits tt = pi::traits_of(golden[i].type);
        CAPTURE(std::string(tt.name));
        const bytes b = random_k_blocks(tt.type_size, halves[i], 1000 + i, 64);
        std::vector<float> y(64 * 256);
        REQUIRE(pi::dequantize_row(golden[i].type, b, y));
        CHECK(fnv1a(y) == golden[i].hash);
    }
}

TEST_CASE("K-quant blocks decode as their layouts say") {
    SUBCASE("Q4_K: d * sc * q - dmin * m, six-bit scales packed in 12 bytes") {
        pi::block_q4_k b{};
        b.d = 0x3c00;    // 1
        b.dmin = 0x3800; // 0.5
        b.scales[0] = 2;          // sub-block 0: sc 2
        b.scales[4] = 3;          // sub-block 0: m 3
        b.scales[8] = 0x45;       // sub-block 4: sc 5 | high bits from byte 0, m 4 | ...
        b.scales[0] |= 0x40;      // sub-block 4's sc gains 16
        b.qs[0] = 0x97;           // element 0: 7, element 32: 9
        b.qs[64] = 0x01;          // element 128 (sub-block 4): 1
        bytes raw(sizeof b);
        std::memcpy(raw.data(), &b, sizeof b);
        const std::vector<float> y = dequantize(ggml_type::q4_k, raw, 256);
        CHECK(y[0] == 2.0f * 7 - 1.5f);
        CHECK(y[1] == -1.5f);
        CHECK(y[32] == 0.0f * 9); // sub-block 1: sc 0, m 0
        CHECK(y[128] == 21.0f * 1 - 0.5f * 4);
    }
    SUBCASE("Q6_K: d * scale * (q - 32), four bits in ql and two in qh") {
        pi::block_q6_k b{};
        b.d = 0x4000; // 2
        for (int s = 0; s < 16; ++s)
            b.scales[s] = static_cast<int8_t>(s - 8);
        b.ql[0] = 0x21;  // element 0: low 1; element 64: low 2
        b.qh[0] = 0x0e;  // element 0: high 2 (bits 0-1), element 32: high 3 (bits 2-3)
        b.ql[32] = 0x0f; // element 32: low 15
        bytes raw(sizeof b);
        std::memcpy(raw.data(), &b, sizeof b);
        const std::vector<float> y = dequantize(ggml_type::q6_k, raw, 256);
        CHECK(y[0] == 2.0f * -8 * (33 - 32));
        CHECK(y[32] == 2.0f * -6 * (63 - 32));
        CHECK(y[64] == 2.0f * -4 * (2 - 32));
        CHECK(y[255] == 2.0f * 7 * -32);
    }
}
