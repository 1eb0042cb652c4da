#include <doctest/doctest.h>

#include <vector>

#include "sampler_helpers.hpp"
#include "support/test_support.hpp"

using namespace pi;
using pi::test::even_tokens_only;
using pi::test::plain_options;
using pi::test::tiny_tokenizer;

namespace {
const std::vector<float> logits = {0.3f, 1.0f, 0.2f, 0.9f, 0.8f, 0.1f, 0.7f, 0.6f};

std::vector<int32_t> draws(sampler& s, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i)
        out.push_back(s.sample(logits));
    return out;
}

std::vector<uint8_t> state_of(const sampler& s) {
    std::vector<uint8_t> out;
    s.save(out);
    return out;
}

// Penalties, DRY with the default breakers, XTC and the draw: every piece of state in use.
sampler_options busy_options(uint32_t seed) {
    sampler_options o = plain_options(1.5f, seed);
    o.repeat_penalty = 1.3f;
    o.frequency_penalty = 0.1f;
    o.penalty_last_n = 5;
    o.dry_multiplier = 0.8f;
    o.xtc_probability = 0.5f;
    o.xtc_threshold = 0.1f;
    return o;
}
} // namespace

TEST_CASE("a loaded state continues exactly like the sampler that saved it") {
    const auto vocab = tiny_tokenizer();
    for (int32_t mirostat : {0, 1, 2}) {
        CAPTURE(mirostat);
        sampler_options o = busy_options(5);
        o.mirostat = mirostat;
        sampler a(o, vocab.get());
        a.accept(3);
        draws(a, 17);
        const std::vector<uint8_t> blob = state_of(a);
        const std::vector<int32_t> expected = draws(a, 40);

        o.seed = 999; // the seed is not part of the configuration: the state replaces it
        sampler b(o, vocab.get());
        draws(b, 3);
        b.load(blob);
        CHECK(state_of(b) == blob);
        CHECK(draws(b, 40) == expected);
    }
}

TEST_CASE("a loaded state rebuilds the constraint from the tokens it accepted") {
    auto owned = std::make_unique<even_tokens_only>();
    sampler a(plain_options(2.0f, 3), nullptr, std::move(owned));
    draws(a, 6);
    const std::vector<uint8_t> blob = state_of(a);
    const std::vector<int32_t> expected = draws(a, 10);

    auto fresh = std::make_unique<even_tokens_only>();
    even_tokens_only* c = fresh.get();
    sampler b(plain_options(2.0f, 4), nullptr, std::move(fresh));
    b.load(blob);
    CHECK(c->accepted.size() == 6);
    CHECK(draws(b, 10) == expected);
    CHECK(c->accepted.size() == 16);

    sampler_options other = plain_options(2.0f, 4);
    other.constraint_source = "another grammar";
    sampler d(other, nullptr, std::make_unique<even_tokens_only>());
    CHECK(pi::test::message_of([&] { d.load(blob); }).find("differently configured") !=
          std::string::npos);
}

TEST_CASE("a truncated, foreign or corrupt state is a format error and changes nothing") {
    const auto vocab = tiny_tokenizer();
    sampler a(busy_options(1), vocab.get());
    draws(a, 9);
    const std::vector<uint8_t> blob = state_of(a);

    sampler b(busy_options(2), vocab.get());
    draws(b, 4);
    const std::vector<uint8_t> before = state_of(b);
    for (size_t n = 0; n < blob.size(); ++n) {
        CAPTURE(n);
        const std::span<const uint8_t> cut(blob.data(), n);
        CHECK(pi::test::code_of([&] { b.load(cut); }) == status::format);
    }
    CHECK(pi::test::message_of([&] {
              b.load(std::span(blob.data(), blob.size() - 1));
          }).find("truncated") != std::string::npos);

    std::vector<uint8_t> longer = blob;
    longer.push_back(0);
    CHECK(pi::test::message_of([&] { b.load(longer); }).find("after its end") != std::string::npos);
    std::vector<uint8_t> bad_magic = blob;
    bad_magic[0] = 'X';
    CHECK(pi::test::message_of([&] { b.load(bad_magic); }).find("magic") != std::string::npos);
    std::vector<uint8_t> bad_version = blob;
    bad_version[4] = 7;
    CHECK(pi::test::message_of([&] { b.load(bad_version); }).find("version 7") !=
          std::string::npos);

    sampler_options other = busy_options(2);
    other.top_k = 3;
    sampler c(other, vocab.get());
    CHECK(pi::test::message_of([&] { c.load(blob); }).find("differently configured") !=
          std::string::npos);
    sampler no_vocab(plain_options(1.0f));
    CHECK(pi::test::code_of([&] { no_vocab.load(blob); }) == status::format);

    CHECK(state_of(b) == before);
    sampler twin(busy_options(2), vocab.get());
    draws(twin, 4);
    CHECK(draws(b, 20) == draws(twin, 20));
}

TEST_CASE("a state the constraint rejects is a format error and the constraint keeps its tokens") {
    // Saved without the even-only rule (odd tokens in the list) but with a constraint present.
    class anything : public even_tokens_only {
      public:
        void apply(candidate_list&) const override {}
        void accept(int32_t token) override { accepted.push_back(token); }
    };
    sampler a(plain_options(5.0f, 8), nullptr, std::make_unique<anything>());
    std::vector<int32_t> got = draws(a, 30);
    REQUIRE(std::any_of(got.begin(), got.end(), [](int32_t t) { return t % 2 != 0; }));
    const std::vector<uint8_t> blob = state_of(a);

    auto owned = std::make_unique<even_tokens_only>();
    even_tokens_only* c = owned.get();
    sampler b(plain_options(5.0f, 8), nullptr, std::move(owned));
    draws(b, 3);
    const std::vector<int32_t> kept = c->accepted;
    const std::vector<uint8_t> before = state_of(b);
    CHECK(pi::test::message_of([&] { b.load(blob); }).find("constraint rejects") !=
          std::string::npos);
    CHECK(c->accepted == kept);
    CHECK(state_of(b) == before);
}
