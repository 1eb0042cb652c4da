// The per-thread math of the GPU kernels (backends/gpu_common/gpu_math.hpp), compiled here by
// the host compiler and checked against the reference: lib/quant's fp16 conversion and the
// formulas of the CPU kernels.
#include "gpu_common/gpu_math.hpp"
#include "quant/types.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
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

template <class W> double dot_by_units(const unsigned char* row, int64_t n, const float* x) {
    float acc = 0.0f;
    for (int64_t u = 0; u < n / W::unit; ++u) {
        float v[W::unit];
        W::load_unit(row, u, v);
        acc = dot_unit(v, x + u * W::unit, acc);
    }
    return acc;
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
