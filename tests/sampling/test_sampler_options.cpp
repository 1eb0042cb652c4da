#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "sampler_helpers.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {
struct bad_case {
    const char* field; // the message must name it
    std::function<void(sampler_options&)> spoil;
};

const float nan_value = std::numeric_limits<float>::quiet_NaN();
} // namespace

TEST_CASE("the default options are valid, with and without a model") {
    CHECK_NOTHROW(sampler(sampler_options{}));
    const auto vocab = pi::test::tiny_tokenizer();
    CHECK_NOTHROW(sampler(sampler_options{}, vocab.get()));
    CHECK(default_stage_order().size() == static_cast<size_t>(n_sampler_stages));
}

TEST_CASE("every bad option is rejected with a message naming it") {
    const auto vocab = pi::test::tiny_tokenizer();
    const std::vector<bad_case> cases = {
        {"temperature", [](sampler_options& o) { o.temperature = nan_value; }},
        {"temperature", [](sampler_options& o) { o.temperature = INFINITY; }},
        {"top_p", [](sampler_options& o) { o.top_p = 0.0f; }},
        {"top_p", [](sampler_options& o) { o.top_p = 1.5f; }},
        {"top_p", [](sampler_options& o) { o.top_p = nan_value; }},
        {"min_p", [](sampler_options& o) { o.min_p = -0.1f; }},
        {"min_p", [](sampler_options& o) { o.min_p = 2.0f; }},
        {"typical_p", [](sampler_options& o) { o.typical_p = 0.0f; }},
        {"dynatemp_range", [](sampler_options& o) { o.dynatemp_range = -1.0f; }},
        {"dynatemp_exponent", [](sampler_options& o) { o.dynatemp_exponent = nan_value; }},
        {"penalty_last_n", [](sampler_options& o) { o.penalty_last_n = -2; }},
        {"repeat_penalty", [](sampler_options& o) { o.repeat_penalty = 0.0f; }},
        {"repeat_penalty", [](sampler_options& o) { o.repeat_penalty = -1.0f; }},
        {"frequency_penalty", [](sampler_options& o) { o.frequency_penalty = nan_value; }},
        {"presence_penalty", [](sampler_options& o) { o.presence_penalty = INFINITY; }},
        {"dry_multiplier", [](sampler_options& o) { o.dry_multiplier = -0.5f; }},
        {"dry_base", [](sampler_options& o) { o.dry_base = 0.5f; }},
        {"dry_allowed_length", [](sampler_options& o) { o.dry_allowed_length = -1; }},
        {"dry_penalty_last_n", [](sampler_options& o) { o.dry_penalty_last_n = -3; }},
        {"dry_sequence_breakers[1]",
         [](sampler_options& o) {
             o.dry_sequence_breakers = {"a", ""};
         }},
        {"xtc_probability", [](sampler_options& o) { o.xtc_probability = 1.5f; }},
        {"xtc_threshold", [](sampler_options& o) { o.xtc_threshold = -0.1f; }},
        {"mirostat", [](sampler_options& o) { o.mirostat = 3; }},
        {"mirostat", [](sampler_options& o) { o.mirostat = -1; }},
        {"mirostat_tau", [](sampler_options& o) { o.mirostat_tau = -1.0f; }},
        {"mirostat_eta", [](sampler_options& o) { o.mirostat_eta = nan_value; }},
        {"min_keep", [](sampler_options& o) { o.min_keep = -1; }},
        {"logit_bias[0].token",
         [](sampler_options& o) {
             o.logit_biases = {{8, 1.0f}};
         }},
        {"logit_bias[1].token",
         [](sampler_options& o) {
             o.logit_biases = {{0, 1.0f}, {-1, 1.0f}};
         }},
        {"logit_bias[0].bias",
         [](sampler_options& o) {
             o.logit_biases = {{1, nan_value}};
         }},
        {"logit_bias[0].bias",
         [](sampler_options& o) {
             o.logit_biases = {{1, INFINITY}};
         }},
        {"stages[1] = 8",
         [](sampler_options& o) {
             o.stages = {sampler_stage::top_k, static_cast<sampler_stage>(8)};
         }},
        {"stages[2]: top_k is listed twice",
         [](sampler_options& o) {
             o.stages = {sampler_stage::top_k, sampler_stage::min_p, sampler_stage::top_k};
         }},
    };
    for (const bad_case& c : cases) {
        CAPTURE(c.field);
        sampler_options o;
        c.spoil(o);
        const auto make = [&] { sampler s(o, vocab.get()); };
        CHECK(pi::test::code_of(make) == status::invalid_argument);
        CHECK(pi::test::message_of(make).find(c.field) != std::string::npos);
    }
}

TEST_CASE("logit bias and DRY breakers without a model say that the sampler needs one") {
    sampler_options bias;
    bias.logit_biases = {{1, 1.0f}};
    CHECK(pi::test::message_of([&] { sampler s(bias); }).find("needs a model") !=
          std::string::npos);
    sampler_options dry;
    dry.dry_multiplier = 1.0f;
    CHECK(pi::test::message_of([&] { sampler s(dry); }).find("needs a model") != std::string::npos);
    dry.dry_sequence_breakers.clear(); // no breakers: the token ids alone suffice
    CHECK_NOTHROW(sampler{dry});
    sampler_options off_ok; // DRY off: its breakers are never matched
    CHECK_NOTHROW(sampler{off_ok});
}
