// The sampler's C functions, through the public library only.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "api/api_test_data.hpp"
#include "powerinfer.h"

namespace {

const std::vector<float> logits = {0.3f, 1.0f, 0.2f, 0.9f, 0.8f, 0.1f, 0.7f, 0.6f};

bool last_error_says(const std::string& words) {
    return std::string(pi_last_error()).find(words) != std::string::npos;
}

pi_sampler_params params(float temperature, uint32_t seed) {
    pi_sampler_params p = pi_sampler_default_params();
    p.temperature = temperature;
    p.seed = seed;
    p.repeat_penalty = 1.2f;
    return p;
}

std::vector<pi_token> draws(pi_sampler* s, int n, const std::vector<float>& l = logits) {
    std::vector<pi_token> out;
    for (int i = 0; i < n; ++i) {
        pi_token t = -1;
        REQUIRE(pi_sample(s, l.data(), static_cast<int32_t>(l.size()), &t) == PI_OK);
        out.push_back(t);
    }
    return out;
}

// One model for the tests that need a vocabulary.
pi_model* tiny_model() {
    static pi_model* model = [] {
        const std::string path = std::string(PI_TEST_BINARY_DIR) + "/sampler-api-tiny.gguf";
        write_tiny_model(path, 3);
        pi_model* m = nullptr;
        REQUIRE(pi_model_load(path.c_str(), nullptr, &m) == PI_OK);
        return m;
    }();
    return model;
}

} // namespace

TEST_CASE("the default sampler params are llama.cpp's") {
    const pi_sampler_params p = pi_sampler_default_params();
    CHECK(p.struct_size == sizeof(pi_sampler_params));
    CHECK(p.temperature == 0.8f);
    CHECK(p.top_k == 40);
    CHECK(p.top_p == 0.95f);
    CHECK(p.seed == PI_SEED_RANDOM);
    CHECK(p.min_p == 0.05f);
    CHECK(p.typical_p == 1.0f);
    CHECK(p.dynatemp_exponent == 1.0f);
    CHECK(p.penalty_last_n == 64);
    CHECK(p.repeat_penalty == 1.0f);
    CHECK(p.dry_multiplier == 0.0f);
    CHECK(p.dry_base == 1.75f);
    CHECK(p.dry_allowed_length == 2);
    CHECK(p.dry_penalty_last_n == -1);
    CHECK(p.dry_sequence_breakers == nullptr);
    CHECK(p.xtc_threshold == 0.1f);
    CHECK(p.mirostat == 0);
    CHECK(p.mirostat_tau == 5.0f);
    CHECK(p.mirostat_eta == 0.1f);
    CHECK(p.stages == nullptr);
    CHECK(p.grammar == nullptr);
}

TEST_CASE("the sampler functions reject NULL and out-of-range arguments") {
    pi_sampler* s = nullptr;
    CHECK(pi_sampler_create(nullptr, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_create_for_model(nullptr, nullptr, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("model"));
    REQUIRE(pi_sampler_create(nullptr, &s) == PI_OK);
    pi_token t = 0;
    CHECK(pi_sample(nullptr, logits.data(), 8, &t) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sample(s, nullptr, 8, &t) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sample(s, logits.data(), 8, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sample(s, logits.data(), 0, &t) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sample(s, logits.data(), -3, &t) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("n_vocab"));
    const float nan_logits[2] = {0.0f, NAN};
    CHECK(pi_sample(s, nan_logits, 2, &t) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_accept(nullptr, 1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_accept(s, -1) == PI_ERR_INVALID_ARGUMENT);
    size_t len = 0;
    CHECK(pi_sampler_state_save(nullptr, nullptr, 0, &len) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_state_save(s, nullptr, 0, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_state_save(s, nullptr, 16, &len) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_state_load(nullptr, "x", 1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_state_load(s, nullptr, 0) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sampler_state_load(s, "garbage!", 8) == PI_ERR_FORMAT);
    pi_sampler_reset(nullptr);
    pi_sampler_free(nullptr);
    pi_sampler_free(s);
}

TEST_CASE("bad sampler params are PI_ERR_INVALID_ARGUMENT naming the field") {
    const auto rejected = [](const pi_sampler_params& p, const char* words) {
        pi_sampler* s = reinterpret_cast<pi_sampler*>(1);
        const bool bad = pi_sampler_create(&p, &s) == PI_ERR_INVALID_ARGUMENT;
        const bool says = last_error_says(words);
        CHECK(s == nullptr);
        return bad && says;
    };
    pi_sampler_params p = pi_sampler_default_params();
    p.struct_size = 0;
    CHECK(rejected(p, "struct_size"));
    p = pi_sampler_default_params();
    p.top_p = 2.0f;
    CHECK(rejected(p, "top_p"));
    p = pi_sampler_default_params();
    p.mirostat = 3;
    CHECK(rejected(p, "mirostat"));
    p = pi_sampler_default_params();
    p.repeat_penalty = NAN;
    CHECK(rejected(p, "repeat_penalty"));
    const int32_t unknown[] = {PI_SAMPLER_STAGE_TOP_K, 42};
    p = pi_sampler_default_params();
    p.stages = unknown;
    p.n_stages = 2;
    CHECK(rejected(p, "stages[1]"));
    const int32_t twice[] = {PI_SAMPLER_STAGE_TOP_P, PI_SAMPLER_STAGE_TOP_P};
    p.stages = twice;
    CHECK(rejected(p, "twice"));
    p = pi_sampler_default_params();
    p.n_logit_bias = 1;
    CHECK(rejected(p, "logit_bias"));
    const char* const breakers[] = {"\n", nullptr};
    p = pi_sampler_default_params();
    p.dry_sequence_breakers = breakers;
    p.n_dry_sequence_breakers = 2;
    CHECK(rejected(p, "dry_sequence_breakers[1]"));
}

TEST_CASE("without a model a grammar, a JSON schema, a logit bias and DRY breakers need one") {
    pi_sampler_params p = pi_sampler_default_params();
    p.grammar = "root ::= \"a\"";
    pi_sampler* s = nullptr;
    CHECK(pi_sampler_create(&p, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("needs a model"));
    p = pi_sampler_default_params();
    p.json_schema = "{\"type\": \"string\"}";
    CHECK(pi_sampler_create(&p, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("needs a model"));
    const pi_logit_bias bias[] = {{1, 2.0f}};
    p = pi_sampler_default_params();
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    CHECK(pi_sampler_create(&p, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("needs a model"));
    p = pi_sampler_default_params();
    p.dry_multiplier = 0.8f;
    CHECK(pi_sampler_create(&p, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("needs a model"));
    const char* const none[] = {nullptr};
    p.dry_sequence_breakers = none; // a non-NULL array with no entries: no breakers
    p.n_dry_sequence_breakers = 0;
    REQUIRE(pi_sampler_create(&p, &s) == PI_OK);
    pi_sampler_free(s);
}

TEST_CASE("a 0.1-sized pi_sampler_params gets the defaults of the appended fields") {
    pi_sampler_params p = pi_sampler_default_params();
    p.struct_size = offsetof(pi_sampler_params, min_p);
    p.temperature = 0.0f;
    p.mirostat = 7; // beyond the caller's struct: never read
    pi_sampler* s = nullptr;
    REQUIRE(pi_sampler_create(&p, &s) == PI_OK);
    CHECK(draws(s, 1) == std::vector<pi_token>{1});
    pi_sampler_free(s);
}

TEST_CASE("the stage order and the reset reach through the C API") {
    const std::vector<float> l = {3.0f, 2.9f, 1.0f, 0.0f};
    pi_sampler_params p = params(0.0f, 1);
    p.repeat_penalty = 10.0f;
    p.top_k = 1;
    const int32_t penalise_first[] = {PI_SAMPLER_STAGE_PENALTIES, PI_SAMPLER_STAGE_TOP_K};
    const int32_t cut_first[] = {PI_SAMPLER_STAGE_TOP_K, PI_SAMPLER_STAGE_PENALTIES};
    p.n_stages = 2;
    pi_sampler *a = nullptr, *b = nullptr;
    p.stages = penalise_first;
    REQUIRE(pi_sampler_create(&p, &a) == PI_OK);
    p.stages = cut_first;
    REQUIRE(pi_sampler_create(&p, &b) == PI_OK);
    REQUIRE(pi_sampler_accept(a, 0) == PI_OK);
    REQUIRE(pi_sampler_accept(b, 0) == PI_OK);
    CHECK(draws(a, 1, l) == std::vector<pi_token>{1});
    CHECK(draws(b, 1, l) == std::vector<pi_token>{0});
    pi_sampler_reset(a);
    CHECK(draws(a, 1, l) == std::vector<pi_token>{0}); // the history is gone
    pi_sampler_free(a);
    pi_sampler_free(b);
}

TEST_CASE("a saved sampler state continues identically; a short buffer or a bad blob fails") {
    pi_sampler *a = nullptr, *b = nullptr;
    const pi_sampler_params pa = params(1.0f, 5);
    REQUIRE(pi_sampler_create(&pa, &a) == PI_OK);
    draws(a, 12);
    size_t len = 0;
    REQUIRE(pi_sampler_state_save(a, nullptr, 0, &len) == PI_OK);
    REQUIRE(len > 0);
    std::vector<unsigned char> blob(len);
    size_t needed = 0;
    CHECK(pi_sampler_state_save(a, blob.data(), len - 1, &needed) == PI_ERR_INVALID_ARGUMENT);
    CHECK(needed == len);
    REQUIRE(pi_sampler_state_save(a, blob.data(), blob.size(), &len) == PI_OK);
    const std::vector<pi_token> expected = draws(a, 30);

    const pi_sampler_params pb = params(1.0f, 77);
    REQUIRE(pi_sampler_create(&pb, &b) == PI_OK);
    draws(b, 2);
    std::vector<unsigned char> before(len * 2);
    size_t before_len = 0;
    REQUIRE(pi_sampler_state_save(b, before.data(), before.size(), &before_len) == PI_OK);
    CHECK(pi_sampler_state_load(b, blob.data(), blob.size() - 3) == PI_ERR_FORMAT);
    CHECK(last_error_says("truncated"));
    std::vector<unsigned char> after(len * 2);
    size_t after_len = 0;
    REQUIRE(pi_sampler_state_save(b, after.data(), after.size(), &after_len) == PI_OK);
    CHECK(std::vector<unsigned char>(before.begin(), before.begin() + before_len) ==
          std::vector<unsigned char>(after.begin(), after.begin() + after_len));

    pi_sampler* other = nullptr;
    pi_sampler_params po = params(1.0f, 5);
    po.top_k = 2;
    REQUIRE(pi_sampler_create(&po, &other) == PI_OK);
    CHECK(pi_sampler_state_load(other, blob.data(), blob.size()) == PI_ERR_FORMAT);
    CHECK(last_error_says("differently configured"));
    pi_sampler_free(other);

    REQUIRE(pi_sampler_state_load(b, blob.data(), blob.size()) == PI_OK);
    CHECK(draws(b, 30) == expected);
    pi_sampler_free(a);
    pi_sampler_free(b);
}

TEST_CASE("a sampler for a model checks the vocabulary: logit bias range and logit count") {
    pi_model* m = tiny_model();
    const int32_t n_vocab = 4096;
    std::vector<float> l(static_cast<size_t>(n_vocab), 0.0f);
    l[7] = 5.0f;
    const pi_logit_bias bias[] = {{9, 10.0f}};
    pi_sampler_params p = params(0.0f, 1);
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    pi_sampler* s = nullptr;
    REQUIRE(pi_sampler_create_for_model(m, &p, &s) == PI_OK);
    CHECK(draws(s, 1, l) == std::vector<pi_token>{9});
    pi_token t = 0;
    CHECK(pi_sample(s, l.data(), 100, &t) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("vocabulary of 4096"));
    CHECK(pi_sampler_accept(s, n_vocab) == PI_ERR_INVALID_ARGUMENT);
    pi_sampler_free(s);

    const pi_logit_bias outside[] = {{n_vocab, 1.0f}};
    p.logit_bias = outside;
    CHECK(pi_sampler_create_for_model(m, &p, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("outside the vocabulary"));

    p = params(1.0f, 1);
    p.dry_multiplier = 0.8f; // the default breakers, matched against the model's token texts
    REQUIRE(pi_sampler_create_for_model(m, &p, &s) == PI_OK);
    draws(s, 5, l);
    pi_sampler_free(s);
}

TEST_CASE("a grammar for a model constrains the tokens; a malformed one names the place") {
    pi_model* m = tiny_model();
    pi_sampler_params p = params(1.0f, 3);
    p.grammar = "root ::= [0-9]+";
    pi_sampler* s = nullptr;
    REQUIRE(pi_sampler_create_for_model(m, &p, &s) == PI_OK);
    std::vector<float> l(4096, 0.0f);
    // Digits until the grammar may end and the draw takes an end-of-generation token (no text).
    const std::vector<pi_token> tokens = draws(s, 8, l);
    for (size_t k = 0; k < tokens.size(); ++k) {
        char piece[64];
        size_t n = 0;
        REQUIRE(pi_token_to_piece(m, tokens[k], piece, sizeof piece, &n) == PI_OK);
        if (n == 0) {
            CHECK(k > 0);
            break;
        }
        for (size_t i = 0; i < n; ++i)
            CHECK((piece[i] >= '0' && piece[i] <= '9'));
    }
    // Its state loads into a sampler of the same grammar only.
    size_t len = 0;
    REQUIRE(pi_sampler_state_save(s, nullptr, 0, &len) == PI_OK);
    std::vector<unsigned char> blob(len);
    REQUIRE(pi_sampler_state_save(s, blob.data(), len, &len) == PI_OK);
    pi_sampler *same = nullptr, *other = nullptr;
    REQUIRE(pi_sampler_create_for_model(m, &p, &same) == PI_OK);
    CHECK(pi_sampler_state_load(same, blob.data(), len) == PI_OK);
    p.grammar = "root ::= [0-9]* \"x\"";
    REQUIRE(pi_sampler_create_for_model(m, &p, &other) == PI_OK);
    CHECK(pi_sampler_state_load(other, blob.data(), len) == PI_ERR_FORMAT);
    pi_sampler_free(same);
    pi_sampler_free(other);
    pi_sampler_free(s);

    p.grammar = "root ::= (";
    CHECK(pi_sampler_create_for_model(m, &p, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("line 1"));
    p.grammar = "root ::= \"a\"";
    p.json_schema = "{}";
    CHECK(pi_sampler_create_for_model(m, &p, &s) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_says("both"));
}
