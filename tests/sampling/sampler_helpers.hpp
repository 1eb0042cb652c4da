#pragma once
// A tiny vocabulary and a hand-written constraint for the chain tests.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "sampling/sampler.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi::test {

// 8 tokens: <unk> <s> </s> a b : c "\n"-free texts, so DRY's default breakers can be tested.
inline std::unique_ptr<tokenizer> tiny_tokenizer() {
    vocab v;
    v.text = {"<unk>", "<s>", "</s>", "a", "b", ":", "c", "d"};
    return tokenizer::from_vocab(v);
}

// Allows only even token ids; records what it is shown and what it accepts.
class even_tokens_only : public token_constraint {
  public:
    void apply(candidate_list& candidates) const override {
        largest_list = std::max(largest_list, candidates.tokens.size());
        for (token_candidate& c : candidates.tokens)
            if (c.id % 2 != 0) c.logit = -INFINITY;
    }
    void accept(int32_t token) override {
        if (token % 2 != 0) fail(status::invalid_argument, "token ", token, " is odd");
        accepted.push_back(token);
    }
    void reset() override { accepted.clear(); }
    bool may_end() const override { return true; }

    mutable size_t largest_list = 0;
    std::vector<int32_t> accepted;
};

// Options with every stage but the draw off.
inline sampler_options plain_options(float temperature, uint32_t seed = 42) {
    sampler_options o;
    o.temperature = temperature;
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    o.seed = seed;
    return o;
}

} // namespace pi::test
