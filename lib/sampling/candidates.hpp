#pragma once
// Operations on a candidate list that several stages share (docs/sampling.md).
#include <cstdint>
#include <span>

#include "sampling/token_candidates.hpp"

namespace pi {

// Every token of the vocabulary with its logit, in id order. Throws pi::error(invalid_argument)
// on empty logits, a NaN logit or +infinity (-infinity means "impossible" and is kept).
void fill_candidates(candidate_list& list, std::span<const float> logits);

// Largest logit first; equal logits by smaller id, so every order is deterministic.
bool logit_order(const token_candidate& a, const token_candidate& b);
void sort_by_logit(candidate_list& list);
// Puts the n largest first, in logit order, leaving the rest unordered (no-op on a sorted list);
// cheaper than a full sort when a stage only needs the head.
void sort_head(candidate_list& list, size_t n);

// Sets p to the softmax of the logits (relative to the largest, summed in double precision),
// leaving the order alone.
void normalize(candidate_list& list);
// Sorts by logit, then normalize().
void softmax(candidate_list& list);

// Drops the candidates whose logit is -infinity (forbidden by a logit bias or the constraint).
void drop_forbidden(candidate_list& list);

// -sum(p log p) of the candidates' p, skipping p = 0.
double entropy(const candidate_list& list);

} // namespace pi
