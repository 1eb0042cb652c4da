#pragma once
// Log-probabilities of the raw distribution for generation's token events: the chosen token's
// and the N most likely tokens', from the log-softmax of the model's logits (before any stage).
#include <cstdint>
#include <span>
#include <vector>

namespace pi {

struct token_logprob {
    int32_t token = 0;
    float logprob = 0.0f;
};

struct token_logprobs {
    token_logprob chosen;
    std::vector<token_logprob> top; // most likely first (equal ones by id), at most n_top
};

// Throws pi::error(invalid_argument) on empty or NaN logits, a chosen token outside them or a
// negative n_top.
token_logprobs top_logprobs(std::span<const float> logits, int32_t chosen, int32_t n_top);

} // namespace pi
