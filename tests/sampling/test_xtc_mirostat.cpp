#include <doctest/doctest.h>

#include "candidate_helpers.hpp"
#include "sampling/mirostat.hpp"
#include "sampling/xtc.hpp"

using namespace pi;
using pi::test::kept_ids;
using pi::test::kept_probs;
using pi::test::list_from_probs;
using ids = std::vector<int32_t>;

namespace {
const std::vector<double> probs = {0.4, 0.3, 0.15, 0.1, 0.05};
}

TEST_CASE("XTC with probability 1 removes every top choice but the least likely") {
    std::mt19937 rng(1);
    auto list = list_from_probs(probs);
    exclude_top_choices(list, 1.0f, 0.12f, 0, rng); // 0.4, 0.3, 0.15 pass the threshold
    CHECK(kept_ids(list) == ids{2, 3, 4});
    const auto p = kept_probs(list);
    CHECK(std::abs(p.at(2) - 0.5) < 1e-6);
    CHECK(std::abs(p.at(3) - 1.0 / 3) < 1e-6);
    CHECK(std::abs(p.at(4) - 1.0 / 6) < 1e-6);
}

TEST_CASE("XTC leaves the list alone when it cannot act") {
    std::mt19937 rng(1);
    auto one_above = list_from_probs(probs);
    exclude_top_choices(one_above, 1.0f, 0.35f, 0, rng); // only 0.4 passes: nothing to remove
    CHECK(one_above.tokens.size() == 5);
    auto kept = list_from_probs(probs);
    exclude_top_choices(kept, 1.0f, 0.12f, 4, rng); // would leave 3 < min_keep
    CHECK(kept.tokens.size() == 5);
    auto high = list_from_probs(probs);
    exclude_top_choices(high, 1.0f, 0.6f, 0, rng);
    CHECK(high.tokens.size() == 5);
    const std::mt19937 before = rng;
    auto off = list_from_probs(probs);
    exclude_top_choices(off, 0.0f, 0.12f, 0, rng);
    CHECK(off.tokens.size() == 5);
    CHECK((rng == before)); // no draw when off
}

TEST_CASE("mirostat v2 keeps the tokens with surprise <= mu and learns from the pick") {
    const float tau = 2.0f, eta = 0.1f;
    // Surprises in bits: 1.32, 1.74, 2.74, 3.32, 4.32; mu = 3 keeps the first three.
    std::mt19937 rng(3);
    auto list = list_from_probs(probs);
    const mirostat_pick m = mirostat_v2(list, tau, eta, 3.0f, rng);
    CHECK(kept_ids(list) == ids{0, 1, 2});
    const double p = list.tokens[m.index].p;
    CHECK(std::abs(p - probs[static_cast<size_t>(list.tokens[m.index].id)] / 0.85) < 1e-6);
    CHECK(m.mu == doctest::Approx(3.0 - eta * (-std::log2(p) - tau)));

    // mu below every surprise keeps just the most likely token.
    auto one = list_from_probs(probs);
    const mirostat_pick low = mirostat_v2(one, tau, eta, 0.5f, rng);
    CHECK(one.tokens.size() == 1);
    CHECK(low.mu == doctest::Approx(0.5 - eta * (-std::log2(1.0) - tau)));
}

TEST_CASE("mirostat v1 truncates to the k its Zipf estimate gives and learns from the pick") {
    // An exact Zipf distribution p_i ~ 1/i^s: the estimate of s is s itself.
    const double s = 1.5;
    const int32_t n = 200;
    std::vector<double> zipf;
    for (int32_t i = 1; i <= n; ++i)
        zipf.push_back(1.0 / std::pow(i, s));
    const float tau = 3.0f, eta = 0.1f, mu = 6.0f;
    const double eps = s - 1.0;
    const double k = std::pow(eps * std::pow(2.0, mu) / (1.0 - std::pow(double(n), -eps)), 1.0 / s);

    std::mt19937 rng(5);
    auto list = list_from_probs(zipf);
    const mirostat_pick m = mirostat_v1(list, n, tau, eta, 100, mu, rng);
    CHECK(list.tokens.size() == static_cast<size_t>(k));
    const double p = list.tokens[m.index].p;
    CHECK(m.mu == doctest::Approx(mu - eta * (-std::log2(p) - tau)));
}
