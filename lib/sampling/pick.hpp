#pragma once
// The final pick of a step: the most likely candidate, or a seeded draw.
#include <cstddef>
#include <random>

#include "sampling/token_candidates.hpp"

namespace pi {

// Index of the largest logit (equal logits: the smaller id). The list must not be empty.
size_t pick_greedy(const candidate_list& list);

// Leaves only the candidate pick_greedy would choose.
void keep_most_likely(candidate_list& list);

// Index drawn from the softmax of the candidates (their p is set; the order is kept): one 24-bit
// uniform number u scaled by the sum of p; the first candidate in list order whose running sum
// exceeds it is chosen.
size_t pick_random(candidate_list& list, std::mt19937& rng);

} // namespace pi
