#pragma once
// The stages that keep a subset of the candidates (llama.cpp's semantics, docs/sampling.md).
// Each keeps at least max(min_keep, 1) candidates when it truncates at all.
#include <cstdint>

#include "sampling/token_candidates.hpp"

namespace pi {

// The k most likely tokens; k <= 0 is off.
void top_k(candidate_list& list, int32_t k, int32_t min_keep);
// The most likely tokens up to and including the one where the cumulative probability first
// reaches p; p >= 1 is off.
void top_p(candidate_list& list, float p, int32_t min_keep);
// The tokens whose probability is at least p times the most likely one's; p <= 0 is off.
void min_p(candidate_list& list, float p, int32_t min_keep);
// Locally typical sampling: the tokens whose surprise is closest to the entropy, until their
// cumulative probability exceeds p; p >= 1 is off. Leaves the list in that order (unsorted).
void typical(candidate_list& list, float p, int32_t min_keep);

} // namespace pi
