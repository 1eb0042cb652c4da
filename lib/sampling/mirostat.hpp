#pragma once
// Mirostat (llama.cpp's v1 and v2): draws so that the surprise -log2 p of the chosen tokens
// tracks the target tau, steering a truncation threshold mu by the learning rate eta.
#include <cstdint>
#include <random>

#include "sampling/token_candidates.hpp"

namespace pi {

struct mirostat_pick {
    size_t index = 0; // into the (truncated) candidate list
    float mu = 0.0f;  // the value mu takes once this pick is accepted
};

// v1: estimates the Zipf exponent from the m most likely tokens, keeps the top k that give an
// expected surprise of mu over a vocabulary of n_vocab tokens, draws, and updates mu.
mirostat_pick mirostat_v1(candidate_list& list, int32_t n_vocab, float tau, float eta, int32_t m,
                          float mu, std::mt19937& rng);
// v2: keeps the tokens whose surprise is at most mu (at least one), draws, and updates mu.
mirostat_pick mirostat_v2(candidate_list& list, float tau, float eta, float mu, std::mt19937& rng);

} // namespace pi
