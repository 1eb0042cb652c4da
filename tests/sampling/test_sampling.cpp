#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/sampler.hpp"
#include "support/error.hpp"

using namespace pi;

namespace {
const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 1.9f};

sampler_options opts(float temp, int top_k, float top_p, uint32_t seed = 42) {
    sampler_options o;
    o.temperature = temp;
    o.top_k = top_k;
    o.top_p = top_p;
    o.seed = seed;
    return o;
}
} // namespace

TEST_CASE("temperature 0 is greedy argmax") {
    sampler s(opts(0.0f, 40, 0.95f));
    CHECK(s.sample(logits) == 1);
}

TEST_CASE("top-k 1 always picks the most likely token") {
    sampler s(opts(1.0f, 1, 1.0f));
    for (int i = 0; i < 50; ++i) CHECK(s.sample(logits) == 1);
}

TEST_CASE("a tiny top-p keeps only the most likely token") {
    sampler s(opts(1.0f, 0, 0.01f));
    for (int i = 0; i < 50; ++i) CHECK(s.sample(logits) == 1);
}

TEST_CASE("top-k restricts draws to the k best tokens") {
    sampler s(opts(5.0f, 3, 1.0f));
    for (int i = 0; i < 200; ++i) {
        const int32_t t = s.sample(logits);
        CHECK((t == 1 || t == 5 || t == 3));
    }
}

TEST_CASE("the same seed gives the same sequence of draws") {
    sampler a(opts(1.0f, 0, 1.0f, 7)), b(opts(1.0f, 0, 1.0f, 7));
    for (int i = 0; i < 100; ++i) CHECK(a.sample(logits) == b.sample(logits));
}

TEST_CASE("draws follow the softmax at temperature 1 (within 3 standard errors)") {
    sampler s(opts(1.0f, 0, 1.0f, 1234));
    const int n = 20000;
    std::vector<int> counts(logits.size());
    for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.sample(logits))];
    double z = 0;
    for (float l : logits) z += std::exp(l);
    for (size_t i = 0; i < logits.size(); ++i) {
        const double p = std::exp(logits[i]) / z;
        const double se = std::sqrt(p * (1 - p) / n);
        CHECK(std::abs(counts[i] / double(n) - p) < 3 * se + 1e-3);
    }
}

TEST_CASE("NaN logits, empty logits and a bad top-p are errors") {
    sampler s(opts(1.0f, 0, 1.0f));
    const std::vector<float> nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
    CHECK_THROWS_AS(s.sample(nan), error);
    CHECK_THROWS_AS(s.sample(std::span<const float>{}), error);
    CHECK_THROWS_AS(sampler(opts(1.0f, 0, 0.0f)), error);
    CHECK_THROWS_AS(sampler(opts(std::numeric_limits<float>::infinity(), 0, 1.0f)), error);
}
