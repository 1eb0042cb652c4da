#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "sampling/logprobs.hpp"
#include "support/test_support.hpp"

using namespace pi;

TEST_CASE("top_logprobs gives the log-softmax of the chosen token and the N most likely") {
    // Softmax 1/6, 2/6, 3/6 (logits shifted by 10 to show the normalisation).
    const std::vector<float> logits = {10.0f, 10.0f + std::log(2.0f), 10.0f + std::log(3.0f)};
    const token_logprobs r = top_logprobs(logits, 1, 2);
    CHECK(r.chosen.token == 1);
    CHECK(r.chosen.logprob == doctest::Approx(std::log(2.0 / 6)).epsilon(1e-6));
    REQUIRE(r.top.size() == 2);
    CHECK(r.top[0].token == 2);
    CHECK(r.top[0].logprob == doctest::Approx(std::log(3.0 / 6)).epsilon(1e-6));
    CHECK(r.top[1].token == 1);
    CHECK(top_logprobs(logits, 0, 0).top.empty());
    CHECK(top_logprobs(logits, 0, 10).top.size() == 3);
}

TEST_CASE("top_logprobs rejects bad input") {
    const std::vector<float> logits = {0.0f, 1.0f};
    CHECK(pi::test::code_of([&] { top_logprobs(logits, 2, 1); }) == status::invalid_argument);
    CHECK(pi::test::code_of([&] { top_logprobs(logits, -1, 1); }) == status::invalid_argument);
    CHECK(pi::test::code_of([&] { top_logprobs(logits, 0, -1); }) == status::invalid_argument);
    CHECK(pi::test::code_of([&] { top_logprobs({}, 0, 1); }) == status::invalid_argument);
}
