#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampler_helpers.hpp"
#include "support/test_support.hpp"

using namespace pi;
using pi::test::even_tokens_only;
using pi::test::plain_options;
using pi::test::tiny_tokenizer;

namespace {
const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 1.9f};

std::vector<int32_t> draws(sampler& s, std::span<const float> l, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i)
        out.push_back(s.sample(l));
    return out;
}
} // namespace

TEST_CASE("temperature <= 0 is the greedy pick, equal logits going to the smaller id") {
    sampler s(plain_options(0.0f));
    CHECK(s.sample(logits) == 1);
    const std::vector<float> tie = {1.0f, 3.0f, 3.0f};
    CHECK(s.sample(tie) == 1);
    sampler defaults([] {
        sampler_options o;
        o.temperature = -1.0f;
        return o;
    }());
    CHECK(defaults.sample(logits) == 1);
}

TEST_CASE("the same seed gives the same draws and the draws stay in the kept set") {
    sampler_options o; // llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05, t 0.8
    o.seed = 7;
    sampler a(o), b(o);
    CHECK(draws(a, logits, 100) == draws(b, logits, 100));
    o.top_k = 3;
    o.temperature = 5.0f;
    sampler c(o);
    for (int32_t t : draws(c, logits, 200))
        CHECK((t == 1 || t == 5 || t == 3));
}

TEST_CASE("seeded draws follow the target distribution (chi-square, p = 0.001)") {
    const int n = 20000;
    const auto chi_square = [&](sampler& s, const std::vector<double>& p) {
        std::vector<int> count(logits.size());
        for (int i = 0; i < n; ++i)
            ++count[static_cast<size_t>(s.sample(logits))];
        double chi2 = 0.0;
        for (size_t i = 0; i < p.size(); ++i) {
            if (p[i] == 0.0) {
                CHECK(count[i] == 0);
                continue;
            }
            const double expected = n * p[i];
            chi2 += (count[i] - expected) * (count[i] - expected) / expected;
        }
        return chi2;
    };
    // The softmax at temperature 1: 5 degrees of freedom, critical value 20.52.
    std::vector<double> p(logits.size());
    double z = 0.0;
    for (float l : logits)
        z += std::exp(l);
    for (size_t i = 0; i < logits.size(); ++i)
        p[i] = std::exp(logits[i]) / z;
    sampler full(plain_options(1.0f, 1234));
    CHECK(chi_square(full, p) < 20.52);

    // Top-3 at temperature 0.7: 2 degrees of freedom, critical value 13.82.
    sampler_options o = plain_options(0.7f, 99);
    o.top_k = 3;
    std::vector<double> q(logits.size(), 0.0);
    double zq = 0.0;
    for (size_t i : {1u, 5u, 3u})
        zq += std::exp(logits[i] / 0.7);
    for (size_t i : {1u, 5u, 3u})
        q[i] = std::exp(logits[i] / 0.7) / zq;
    sampler top3(o);
    CHECK(chi_square(top3, q) < 13.82);
}

TEST_CASE("logit bias adds to a token's logit and -infinity bans it") {
    const auto vocab = tiny_tokenizer();
    const std::vector<float> l = {0.0f, 0.0f, 0.0f, 5.0f, 1.0f, 0.0f, 0.0f, 0.0f};
    sampler_options o = plain_options(0.0f);
    o.logit_biases = {{4, 3.0f}, {4, 2.0f}}; // 1 + 5 beats 5
    sampler boosted(o, vocab.get());
    CHECK(boosted.sample(l) == 4);
    o.logit_biases = {{3, -INFINITY}};
    sampler banned(o, vocab.get());
    CHECK(banned.sample(l) == 4);
    // Even a draw at a high temperature never picks a banned token.
    o.temperature = 100.0f;
    sampler hot(o, vocab.get());
    for (int i = 0; i < 500; ++i)
        CHECK(hot.sample(l) != 3);
}

TEST_CASE("a sampler with a vocabulary wants exactly that many logits") {
    const auto vocab = tiny_tokenizer();
    sampler s(plain_options(0.0f), vocab.get());
    CHECK(pi::test::code_of([&] { s.sample(logits); }) == status::invalid_argument);
    CHECK(pi::test::message_of([&] { s.sample(logits); }).find("vocabulary of 8") !=
          std::string::npos);
    CHECK(pi::test::code_of([&] { s.accept(8); }) == status::invalid_argument);
}

TEST_CASE("penalties act on the tokens the sampler chose and the ones it was told") {
    sampler_options o = plain_options(0.0f);
    o.repeat_penalty = 4.0f;
    o.penalty_last_n = 2;
    sampler s(o);
    CHECK(s.sample(logits) == 1); // 2.0 wins
    CHECK(s.sample(logits) == 5); // 1 is now 0.5; 1.9 wins
    CHECK(s.sample(logits) == 3); // 1 and 5 penalised
    CHECK(s.history() == std::vector<int32_t>{5, 3});
    s.accept(1);
    s.accept(3);
    CHECK(s.sample(logits) == 5); // the ring holds 1, 3: 5 is free again
    s.reset();
    CHECK(s.history().empty());
    CHECK(s.sample(logits) == 1);
}

TEST_CASE("the stage order changes the result") {
    const std::vector<float> l = {3.0f, 2.9f, 1.0f, 0.0f};
    sampler_options o = plain_options(0.0f);
    o.repeat_penalty = 10.0f;
    o.top_k = 1;
    o.stages = {sampler_stage::penalties, sampler_stage::top_k};
    sampler penalise_first(o);
    penalise_first.accept(0);
    CHECK(penalise_first.sample(l) == 1); // 3 / 10 falls behind 2.9
    o.stages = {sampler_stage::top_k, sampler_stage::penalties};
    sampler cut_first(o);
    cut_first.accept(0);
    CHECK(cut_first.sample(l) == 0); // only token 0 was left to penalise
    o.stages = {sampler_stage::top_k};
    sampler no_penalties(o);
    no_penalties.accept(0);
    CHECK(no_penalties.sample(l) == 0);
}

TEST_CASE("XTC in the chain removes the top choices") {
    sampler_options o = plain_options(0.0f);
    o.xtc_probability = 1.0f;
    o.xtc_threshold = 0.2f; // softmax: 1 (0.36), 5 (0.33), 3 (0.22) pass
    sampler s(o);
    CHECK(s.sample(logits) == 3);
}

TEST_CASE("DRY in the chain needs a vocabulary for its breakers and penalises repeats") {
    sampler_options o = plain_options(0.0f);
    o.dry_multiplier = 2.0f;
    o.dry_allowed_length = 1;
    CHECK(pi::test::code_of([&] { sampler s(o); }) == status::invalid_argument);
    CHECK(pi::test::message_of([&] { sampler s(o); }).find("needs a model") != std::string::npos);
    const auto vocab = tiny_tokenizer();
    // a b c d a b: c would repeat "a b" (length 2): 2 * 1.75^(2-1) = 3.5 off c's logit.
    const std::vector<float> l = {0, 0, 0, 0, 0, 0, 3.0f, 0};
    sampler s(o, vocab.get());
    for (int32_t t : {3, 4, 6, 7, 3, 4})
        s.accept(t);
    CHECK(s.sample(l) == 0);
    // a b c d : a b: the breaker lies before the newest "a b", which still repeats.
    sampler broken(o, vocab.get());
    for (int32_t t : {3, 4, 6, 7, 5, 3, 4})
        broken.accept(t);
    CHECK(broken.sample(l) == 0);
    sampler after(o, vocab.get());
    for (int32_t t : {3, 4, 6, 7, 3, 4, 5})
        after.accept(t);
    CHECK(after.sample(l) == 6); // the breaker is the newest token: nothing repeats after it
}

TEST_CASE("mirostat v2 in the chain moves mu and reset restores 2 tau") {
    sampler_options o = plain_options(1.0f, 11);
    o.mirostat = 2;
    o.mirostat_tau = 1.0f;
    sampler s(o);
    CHECK(s.mirostat_mu() == 2.0f);
    const int32_t first = s.sample(logits);
    CHECK(s.mirostat_mu() != 2.0f);
    s.reset();
    CHECK(s.mirostat_mu() == 2.0f);
    CHECK(s.sample(logits) == first);
}

TEST_CASE("the constraint is checked on the chosen token first and on all only when it fails") {
    auto owned = std::make_unique<even_tokens_only>();
    even_tokens_only* c = owned.get();
    sampler s(plain_options(0.0f), nullptr, std::move(owned));
    const std::vector<float> even_best = {0.0f, 1.0f, 5.0f, 2.0f};
    CHECK(s.sample(even_best) == 2);
    CHECK(c->largest_list == 1);  // accepted at once: never applied to the whole list
    CHECK(s.sample(logits) == 0); // 1, 5 and 3 are odd; the best even one is 0 (0.5)
    CHECK(c->largest_list == logits.size());
    CHECK(c->accepted == std::vector<int32_t>{2, 0});
    s.accept(1); // a prompt token: history only
    CHECK(c->accepted.size() == 2);
    s.reset();
    CHECK(c->accepted.empty());
}

TEST_CASE("bad logits and a constraint that allows nothing are errors") {
    sampler s(plain_options(1.0f));
    const std::vector<float> nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
    const std::vector<float> inf = {1.0f, INFINITY};
    CHECK(pi::test::code_of([&] { s.sample(nan); }) == status::invalid_argument);
    CHECK(pi::test::code_of([&] { s.sample(inf); }) == status::invalid_argument);
    CHECK(pi::test::code_of([&] { s.sample(std::span<const float>{}); }) ==
          status::invalid_argument);
    sampler g(plain_options(1.0f), nullptr, std::make_unique<even_tokens_only>());
    const std::vector<float> odd_only = {-INFINITY, 1.0f};
    CHECK(pi::test::message_of([&] { g.sample(odd_only); }).find("allow no token") !=
          std::string::npos);
}
