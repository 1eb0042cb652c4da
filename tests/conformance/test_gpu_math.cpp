// The per-thread math of the GPU kernels (backends/gpu_common/gpu_math.hpp), compiled here by
// the host compiler and checked against the reference: lib/quant's fp16 conversion and block
// dequantization, and the formulas of the CPU kernels.
#include "gpu_common/gpu_math.hpp"
#include "quant/quantize.hpp"
#include "quant/types.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

using namespace pi::gpu;

namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

std::vector<float> random_floats(std::size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = dist(rng);
    return v;
}

// 16-byte aligned storage for the vector weight types.
struct alignas(16) row_bytes {
    std::array<unsigned char, 4096> b{};
};

// Same bits, or both NaN (an infinite scale times a zero code).
bool same_float(float a, float b) {
    return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b));
}

// Blocks of a quantized type as lib/quant sees them, with the raw-byte view the traits read.
template <class Block> struct block_row {
    std::vector<Block> blocks;

    int64_t n() const { return static_cast<int64_t>(blocks.size()) * 32; }
    const unsigned char* bytes() const {
        return reinterpret_cast<const unsigned char*>(blocks.data());
    }
};

// Scales that stress the conversion: zero and negative zero, the smallest subnormal, the largest
// finite value of both signs, infinity and NaN.
constexpr uint16_t edge_scales[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400,
                                    0x7bff, 0xfbff, 0x3c00, 0x7c00, 0xfc00, 0x7e00};

// Random scales (every exponent, both signs) and random codes, then blocks of every edge scale
// with extreme codes: all zero bytes, all 0xff bytes, and alternating extremes.
template <class Block> block_row<Block> test_blocks(uint32_t seed) {
    std::mt19937 rng(seed);
    block_row<Block> row;
    for (int i = 0; i < 64; ++i) {
        Block b{};
        b.d = static_cast<uint16_t>(rng() & 0xffffu);
        if ((b.d & 0x7c00u) == 0x7c00u) b.d &= 0xbfffu; // finite: infinities come below
        for (auto& q : b.qs)
            q = static_cast<std::remove_reference_t<decltype(q)>>(rng() & 0xffu);
        row.blocks.push_back(b);
    }
    for (uint16_t d : edge_scales) {
        for (int fill : {0x00, 0xff, -1}) {
            Block b{};
            b.d = d;
            for (std::size_t j = 0; j < sizeof b.qs; ++j) {
                const int byte = fill >= 0 ? fill : (j % 2 == 0 ? 0x80 : 0x7f);
                b.qs[j] = static_cast<std::remove_reference_t<decltype(b.qs[j])>>(byte);
            }
            row.blocks.push_back(b);
        }
    }
    return row;
}

// Every element through load and every unit through load_unit equals lib/quant's dequantized
// value, bit for bit.
template <class W, class Block, class Dequantize>
void check_against_reference(const block_row<Block>& row, Dequantize dequantize) {
    std::vector<float> want(static_cast<std::size_t>(row.n()));
    dequantize(row.blocks.data(), want.data(), row.n());
    int mismatches = 0;
    int64_t first_bad = -1;
    for (int64_t i = 0; i < row.n(); ++i) {
        if (!same_float(W::load(row.bytes(), i), want[i]) && mismatches++ == 0) first_bad = i;
    }
    for (int64_t u = 0; u < row.n() / W::unit; ++u) {
        float v[W::unit];
        W::load_unit(row.bytes(), u, v);
        for (int e = 0; e < W::unit; ++e)
            if (!same_float(v[e], want[u * W::unit + e]) && mismatches++ == 0)
                first_bad = u * W::unit + e;
    }
    INFO("first mismatch at element " << first_bad);
    CHECK(mismatches == 0);
}

template <class W> double dot_by_units(const unsigned char* row, int64_t n, const float* x) {
    float acc[1] = {0.0f};
    for (int64_t u = 0; u < n / W::unit; ++u) {
        float v[1][W::unit];
        W::load_unit(row, u, v[0]);
        dot_units(v, x + u * W::unit, acc);
    }
    return acc[0];
}

// The bytes [begin, end) as the kernels copy them (range_word), with the word after them that
// bytes8_in_words may read, zero.
std::vector<uint32_t> copy_as_words(const unsigned char* begin, const unsigned char* end) {
    std::vector<uint32_t> words(static_cast<std::size_t>(range_words(begin, end)) + 1, 0u);
    for (int w = 0; w + 1 < static_cast<int>(words.size()); ++w)
        words[static_cast<std::size_t>(w)] = range_word(begin, end, w);
    return words;
}

// Every unit and element of a quantized row converted from its copy as aligned words equals
// load_unit and load on the row, bit for bit, for a row starting 0 and 2 bytes into a word.
template <class W, class Block> void check_words(const block_row<Block>& row) {
    const std::size_t size = row.blocks.size() * sizeof(Block);
    for (std::size_t lead : {0u, 2u}) {
        CAPTURE(lead);
        std::vector<uint32_t> storage(size / 4 + 2, 0xa5a5a5a5u);
        auto* at = reinterpret_cast<unsigned char*>(storage.data()) + lead;
        std::memcpy(at, row.bytes(), size);
        const std::vector<uint32_t> words = copy_as_words(at, at + size);
        int mismatches = 0;
        for (int64_t b = 0; b < static_cast<int64_t>(row.blocks.size()); ++b) {
            const int blk = static_cast<int>(lead + b * W::block_bytes);
            for (int q = 0; q < W::units_per_block; ++q) {
                float got[W::unit], want[W::unit];
                W::unit_from_words(words.data(), blk, q, got);
                W::load_unit(row.bytes(), b * W::units_per_block + q, want);
                for (int e = 0; e < W::unit; ++e)
                    mismatches += same_float(got[e], want[e]) ? 0 : 1;
            }
            for (int j = 0; j < W::block; ++j)
                mismatches += same_float(W::element_from_words(words.data(), blk, j),
                                         W::load(row.bytes(), b * W::block + j))
                                  ? 0
                                  : 1;
        }
        CHECK(mismatches == 0);
    }
}

} // namespace

TEST_CASE("half_to_float equals the reference for every binary16 value") {
    int mismatches = 0;
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
        const float got = half_to_float(static_cast<uint16_t>(h));
        const float want = pi::fp16_to_fp32(static_cast<uint16_t>(h));
        if (bits(got) != bits(want)) ++mismatches;
    }
    CHECK(mismatches == 0);
}

TEST_CASE("float_to_half rounds like the reference: ties to even, subnormals, overflow, NaN") {
    std::vector<float> values = {0.0f,          -0.0f,         INFINITY,      -INFINITY,
                                 NAN,           65504.0f,      65519.99f,     65520.0f,
                                 -65520.0f,     6.1035156e-5f, 6.0975552e-5f, 5.9604645e-8f,
                                 2.9802322e-8f, 2.9802326e-8f, 1.0009766f,    1.0004883f,
                                 1.00146484f,   1e-10f,        3.0e38f};
    // Every 8191st bit pattern: all exponents, many mantissas, both signs.
    for (uint64_t u = 0; u <= 0xffffffffu; u += 8191)
        values.push_back(from_bits(static_cast<uint32_t>(u)));
    int mismatches = 0;
    float first_bad = 0.0f;
    for (float v : values) {
        if (float_to_half(v) != pi::fp32_to_fp16(v)) {
            if (mismatches++ == 0) first_bad = v;
        }
    }
    INFO("first mismatch at bits " << bits(first_bad));
    CHECK(mismatches == 0);
}

TEST_CASE("element stores round-trip through the weight types") {
    row_bytes r;
    w_f32::store(r.b.data(), 3, 1.25f);
    CHECK(w_f32::load(r.b.data(), 3) == 1.25f);
    w_f16::store(r.b.data(), 5, 0.1f);
    CHECK(w_f16::load(r.b.data(), 5) == pi::fp16_to_fp32(pi::fp32_to_fp16(0.1f)));
}

TEST_CASE("vector units convert the same elements as element loads") {
    const std::vector<float> v = random_floats(256, 1);
    row_bytes f32_row, f16_row;
    std::memcpy(f32_row.b.data(), v.data(), v.size() * sizeof(float));
    for (std::size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = pi::fp32_to_fp16(v[i]);
        std::memcpy(f16_row.b.data() + 2 * i, &h, sizeof h);
    }
    for (int64_t u = 0; u < 256 / 8; ++u) {
        float a[8];
        w_f16x8::load_unit(f16_row.b.data(), u, a);
        for (int e = 0; e < 8; ++e)
            CHECK(bits(a[e]) == bits(w_f16::load(f16_row.b.data(), u * 8 + e)));
    }
    for (int64_t u = 0; u < 256 / 4; ++u) {
        float a[4];
        w_f32x4::load_unit(f32_row.b.data(), u, a);
        for (int e = 0; e < 4; ++e)
            CHECK(bits(a[e]) == bits(v[u * 4 + e]));
    }
}

TEST_CASE("unit dot products match a double-precision dot product") {
    const int64_t n = 1000;
    const std::vector<float> w = random_floats(n, 2);
    const std::vector<float> x = random_floats(n, 3);
    row_bytes f32_row, f16_row;
    std::memcpy(f32_row.b.data(), w.data(), n * sizeof(float));
    double want32 = 0.0, want16 = 0.0, scale = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = pi::fp32_to_fp16(w[i]);
        std::memcpy(f16_row.b.data() + 2 * i, &h, sizeof h);
        want32 += static_cast<double>(w[i]) * x[i];
        want16 += static_cast<double>(pi::fp16_to_fp32(h)) * x[i];
        scale += std::fabs(static_cast<double>(w[i]) * x[i]);
    }
    // A float FMA chain over n terms: error below n * 2^-24 of the sum of magnitudes.
    const double tol = scale * n * 6e-8;
    CHECK(std::fabs(dot_by_units<w_f32>(f32_row.b.data(), n, x.data()) - want32) <= tol);
    CHECK(std::fabs(dot_by_units<w_f32x4>(f32_row.b.data(), n, x.data()) - want32) <= tol);
    CHECK(std::fabs(dot_by_units<w_f16>(f16_row.b.data(), n, x.data()) - want16) <= tol);
    CHECK(std::fabs(dot_by_units<w_f16x8>(f16_row.b.data(), n, x.data()) - want16) <= tol);
}

TEST_CASE("Q8_0 traits dequantize random and edge blocks exactly as lib/quant") {
    static_assert(w_q8_0::block_bytes == 34 && w_q8_0::codes == 2 && w_q8_0::align == 2);
    check_against_reference<w_q8_0>(test_blocks<pi::block_q8_0>(6), pi::dequantize_row_q8_0);
}

TEST_CASE("Q4_0 traits dequantize random and edge blocks exactly as lib/quant") {
    static_assert(w_q4_0::block_bytes == 18 && w_q4_0::codes == 2 && w_q4_0::align == 2);
    check_against_reference<w_q4_0>(test_blocks<pi::block_q4_0>(7), pi::dequantize_row_q4_0);
}

TEST_CASE("an all-zero block is +0 and a negative-zero scale keeps the product's sign") {
    pi::block_q8_0 q8{};
    pi::block_q4_0 q4{};
    const auto* p8 = reinterpret_cast<const unsigned char*>(&q8);
    const auto* p4 = reinterpret_cast<const unsigned char*>(&q4);
    for (int64_t i = 0; i < 32; ++i) {
        CHECK(bits(w_q8_0::load(p8, i)) == 0u);
        // Code 0 is -8 in Q4_0: -8 * +0 is -0.
        CHECK(bits(w_q4_0::load(p4, i)) == 0x80000000u);
    }
    q8.d = 0x8000;
    q8.qs[0] = 5;
    q8.qs[1] = -5;
    q4.d = 0x8000;
    q4.qs[0] = 0x9f; // element 0: code 15 (+7), element 16: code 9 (+1)
    CHECK(bits(w_q8_0::load(p8, 0)) == 0x80000000u);
    CHECK(bits(w_q8_0::load(p8, 1)) == 0u);
    CHECK(bits(w_q8_0::load(p8, 2)) == 0x80000000u); // code 0 times -0
    CHECK(bits(w_q4_0::load(p4, 0)) == 0x80000000u);
    CHECK(bits(w_q4_0::load(p4, 16)) == 0x80000000u);
    CHECK(bits(w_q4_0::load(p4, 1)) == 0u); // code 0 (-8) times -0
}

TEST_CASE("quantized rows at a 2-byte but not 4-byte aligned address load the same values") {
    const block_row<pi::block_q8_0> q8 = test_blocks<pi::block_q8_0>(8);
    const block_row<pi::block_q4_0> q4 = test_blocks<pi::block_q4_0>(9);
    std::vector<unsigned char> shifted(2 + q8.blocks.size() * sizeof(pi::block_q8_0) + 4);
    auto check_shifted = [&]<class W>(W, const unsigned char* src, std::size_t size, int64_t n) {
        std::memcpy(shifted.data() + 2, src, size);
        int mismatches = 0;
        for (int64_t u = 0; u < n / W::unit; ++u) {
            float got[W::unit], want[W::unit];
            W::load_unit(shifted.data() + 2, u, got);
            W::load_unit(src, u, want);
            for (int e = 0; e < W::unit; ++e)
                mismatches += same_float(got[e], want[e]) ? 0 : 1;
        }
        CHECK(mismatches == 0);
    };
    check_shifted(w_q8_0{}, q8.bytes(), q8.blocks.size() * sizeof(pi::block_q8_0), q8.n());
    check_shifted(w_q4_0{}, q4.bytes(), q4.blocks.size() * sizeof(pi::block_q4_0), q4.n());
}

TEST_CASE("a byte range read as aligned words holds its bytes and zero around them") {
    std::vector<uint32_t> storage(16);
    auto* base = reinterpret_cast<unsigned char*>(storage.data());
    for (std::size_t i = 0; i < storage.size() * 4; ++i)
        base[i] = static_cast<unsigned char>(0x80 + i);
    for (int first : {0, 2, 4, 6}) {
        for (int len : {2, 4, 6, 18, 34, 36}) {
            CAPTURE(first);
            CAPTURE(len);
            const unsigned char* begin = base + first;
            const std::vector<uint32_t> words = copy_as_words(begin, begin + len);
            CHECK(words.size() == static_cast<std::size_t>((first % 4 + len + 3) / 4 + 1));
            int mismatches = 0;
            for (int off = 0; off < static_cast<int>(words.size() - 1) * 4; ++off) {
                const int i = off - first % 4; // byte of the range, or outside it
                const uint32_t want = i >= 0 && i < len ? begin[i] : 0u;
                mismatches += byte_in_words(words.data(), off) == want ? 0 : 1;
            }
            CHECK(mismatches == 0);
            for (int off = first % 4; off + 2 <= first % 4 + len; off += 2)
                CHECK(half_in_words(words.data(), off) ==
                      (begin[off - first % 4] | begin[off - first % 4 + 1] << 8));
            for (int off = first % 4; off + 8 <= first % 4 + len; off += 2) {
                uint32_t lo = 0, hi = 0;
                bytes8_in_words(words.data(), off, lo, hi);
                uint32_t want[2];
                std::memcpy(want, begin + off - first % 4, sizeof want);
                CHECK(lo == want[0]);
                CHECK(hi == want[1]);
            }
        }
    }
}

TEST_CASE("Q8_0 units and elements converted from aligned words equal the row's, at either lead") {
    check_words<w_q8_0>(test_blocks<pi::block_q8_0>(12));
}

TEST_CASE("Q4_0 units and elements converted from aligned words equal the row's, at either lead") {
    check_words<w_q4_0>(test_blocks<pi::block_q4_0>(13));
}

TEST_CASE("rows that share each element of x get the bits they get alone") {
    const std::vector<float> a = random_floats(64, 14), b = random_floats(64, 15);
    const std::vector<float> x = random_floats(64, 16);
    float alone[2][1] = {{0.25f}, {-0.5f}};
    float joint[2] = {0.25f, -0.5f};
    for (int u = 0; u < 8; ++u) {
        float va[1][8], vb[1][8], both[2][8];
        for (int e = 0; e < 8; ++e) {
            va[0][e] = both[0][e] = a[u * 8 + e];
            vb[0][e] = both[1][e] = b[u * 8 + e];
        }
        dot_units(va, x.data() + u * 8, alone[0]);
        dot_units(vb, x.data() + u * 8, alone[1]);
        dot_units(both, x.data() + u * 8, joint);
    }
    CHECK(bits(joint[0]) == bits(alone[0][0]));
    CHECK(bits(joint[1]) == bits(alone[1][0]));
}

TEST_CASE("quantized unit dot products match a double-precision dot over the dequantized row") {
    const int64_t n = 1024;
    const std::vector<float> v = random_floats(n, 10);
    const std::vector<float> x = random_floats(n, 11);
    std::vector<pi::block_q8_0> q8(n / 32);
    std::vector<pi::block_q4_0> q4(n / 32);
    pi::quantize_row_q8_0(v.data(), q8.data(), n);
    pi::quantize_row_q4_0(v.data(), q4.data(), n);
    std::vector<float> d8(n), d4(n);
    pi::dequantize_row_q8_0(q8.data(), d8.data(), n);
    pi::dequantize_row_q4_0(q4.data(), d4.data(), n);
    double want8 = 0.0, want4 = 0.0, scale8 = 0.0, scale4 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        want8 += static_cast<double>(d8[i]) * x[i];
        want4 += static_cast<double>(d4[i]) * x[i];
        scale8 += std::fabs(static_cast<double>(d8[i]) * x[i]);
        scale4 += std::fabs(static_cast<double>(d4[i]) * x[i]);
    }
    // A float FMA chain over n terms, as for the float types.
    const auto* b8 = reinterpret_cast<const unsigned char*>(q8.data());
    const auto* b4 = reinterpret_cast<const unsigned char*>(q4.data());
    CHECK(std::fabs(dot_by_units<w_q8_0>(b8, n, x.data()) - want8) <= scale8 * n * 6e-8);
    CHECK(std::fabs(dot_by_units<w_q4_0>(b4, n, x.data()) - want4) <= scale4 * n * 6e-8);
}

TEST_CASE("activations follow the CPU formulas") {
    for (float g : {-3.0f, -0.5f, -0.0f, 0.0f, 0.25f, 2.0f, 20.0f}) {
        const float u = 1.5f;
        const double silu = g / (1.0 + std::exp(-static_cast<double>(g)));
        CHECK(act_glu(glu_relu, g, u) == (g > 0.0f ? g : 0.0f) * u);
        CHECK(act_glu(glu_relu_relu, g, -u) == 0.0f);
        CHECK(act_glu(glu_relu_relu, g, u) == (g > 0.0f ? g : 0.0f) * u);
        CHECK(std::fabs(act_glu(glu_silu, g, u) - silu * u) <=
              1e-6 * (std::fabs(silu * u) + 1e-30));
    }
}

TEST_CASE("rope_theta is the reference angle") {
    for (int32_t pos : {0, 1, 4095, 32767}) {
        for (int32_t j : {0, 1, 31}) {
            const double want =
                static_cast<double>(pos) * 0.5f * std::pow(10000.0, -2.0 * j / 64.0);
            CHECK(rope_theta(pos, j, 64, 10000.0f, 0.5f) == want);
        }
    }
}

TEST_CASE("a softmax split into running parts and merged equals the two-pass softmax") {
    const std::vector<float> scores = random_floats(37, 4);
    const std::vector<float> values = random_floats(37, 5);
    double max = -INFINITY;
    for (float s : scores)
        max = std::max(max, static_cast<double>(s) * 8.0);
    double sum = 0.0, want = 0.0;
    for (std::size_t j = 0; j < scores.size(); ++j) {
        const double e = std::exp(scores[j] * 8.0 - max);
        sum += e;
        want += e * values[j];
    }
    want /= sum;

    // Four parts taking every fourth score, as the attention kernel's lane groups do, plus an
    // empty fifth part.
    constexpr int parts = 5;
    softmax_state st[parts];
    float acc[parts] = {};
    for (int g = 0; g < parts; ++g)
        st[g] = softmax_empty();
    for (std::size_t j = 0; j < scores.size(); ++j) {
        const int g = static_cast<int>(j % 4);
        float scale_old, weight;
        st[g] = softmax_push(st[g], scores[j] * 8.0f, &scale_old, &weight);
        acc[g] = acc[g] * scale_old + weight * values[j];
    }
    softmax_state total = st[parts - 1]; // start from the empty part
    float out = acc[parts - 1];
    for (int g = 0; g < parts - 1; ++g) {
        float sa, sb;
        total = softmax_merge(total, st[g], &sa, &sb);
        out = out * sa + acc[g] * sb;
    }
    CHECK(std::fabs(out / total.l - want) <= 1e-5);
    CHECK(std::fabs(total.l - sum) <= 1e-5 * sum);

    float sa, sb;
    const softmax_state none = softmax_merge(softmax_empty(), softmax_empty(), &sa, &sb);
    CHECK(none.l == 0.0f);
    CHECK_FALSE(std::isnan(sa));
    CHECK_FALSE(std::isnan(sb));
}
