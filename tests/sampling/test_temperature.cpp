#include <doctest/doctest.h>

#include "candidate_helpers.hpp"
#include "sampling/temperature.hpp"

using namespace pi;
using pi::test::kept_probs;
using pi::test::list_from_probs;

namespace {
const std::vector<double> probs = {0.4, 0.3, 0.15, 0.1, 0.05};

// p^(1/t), normalised.
std::vector<double> tempered(const std::vector<double>& p, double t) {
    std::vector<double> out;
    double sum = 0.0;
    for (double q : p)
        sum += std::pow(q, 1.0 / t);
    for (double q : p)
        out.push_back(std::pow(q, 1.0 / t) / sum);
    return out;
}
} // namespace

TEST_CASE("temperature t turns p into p^(1/t), renormalised") {
    for (float t : {0.5f, 1.0f, 2.0f}) {
        auto list = list_from_probs(probs);
        apply_temperature(list, t);
        const auto got = kept_probs(list);
        const auto want = tempered(probs, t);
        for (size_t i = 0; i < probs.size(); ++i)
            CHECK(std::abs(got.at(static_cast<int32_t>(i)) - want[i]) < 1e-6);
    }
}

TEST_CASE("a temperature <= 0 leaves the logits for the greedy pick") {
    auto list = list_from_probs(probs);
    apply_temperature(list, 0.0f);
    CHECK(list.tokens[0].logit == doctest::Approx(std::log(0.4)));
}

TEST_CASE("dynamic temperature follows the normalised entropy") {
    double h = 0.0;
    for (double q : probs)
        h -= q * std::log(q);
    const double normalised = h / std::log(5.0);
    for (float exponent : {1.0f, 2.0f}) {
        auto list = list_from_probs(probs);
        const double expected = 0.5 + (1.5 - 0.5) * std::pow(normalised, exponent);
        CHECK(dynamic_temperature(list, 1.0f, 0.5f, exponent) ==
              doctest::Approx(expected).epsilon(1e-6));
        auto applied = list_from_probs(probs);
        apply_dynamic_temperature(applied, 1.0f, 0.5f, exponent);
        const auto got = kept_probs(applied);
        const auto want = tempered(probs, expected);
        for (size_t i = 0; i < probs.size(); ++i)
            CHECK(std::abs(got.at(static_cast<int32_t>(i)) - want[i]) < 1e-6);
    }
    // A one-hot distribution has entropy 0: the low end of the range, max(0, t - d).
    auto peaked = list_from_probs({1.0, 0.0});
    CHECK(dynamic_temperature(peaked, 0.8f, 0.3f, 1.0f) == doctest::Approx(0.5).epsilon(1e-5));
    // ... and at t - d <= 0 only the most likely token is left.
    auto greedy = list_from_probs({1.0, 0.0});
    apply_dynamic_temperature(greedy, 0.2f, 0.5f, 1.0f);
    REQUIRE(greedy.tokens.size() == 1);
    CHECK(greedy.tokens[0].id == 0);
}
