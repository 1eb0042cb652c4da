#pragma once
// Logit bias: fixed amounts added to chosen tokens' logits before anything else; -infinity bans
// a token.
#include <cstdint>
#include <span>

#include "sampling/token_candidates.hpp"

namespace pi {

struct logit_bias {
    int32_t token = 0;
    float bias = 0.0f;
};

// The list must still be in id order over the whole vocabulary (as fill_candidates leaves it);
// biases of one token add up.
void apply_logit_bias(candidate_list& list, std::span<const logit_bias> biases);

} // namespace pi
