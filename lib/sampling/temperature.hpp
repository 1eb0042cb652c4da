#pragma once
// Temperature: divides the logits by t (t <= 0 leaves them for the greedy pick). With a dynamic
// range d > 0 the temperature is chosen per step from the candidates' normalised entropy
// (llama.cpp's "dynatemp"): t' = lo + (hi - lo) * (H / log n)^exponent with lo = max(0, t - d),
// hi = t + d, H the entropy of the n candidates: a flat distribution gets hi, a peaked one lo.
#include "sampling/token_candidates.hpp"

namespace pi {

void apply_temperature(candidate_list& list, float t);
void apply_dynamic_temperature(candidate_list& list, float t, float range, float exponent);

// The temperature apply_dynamic_temperature uses for these candidates (sets their p).
float dynamic_temperature(candidate_list& list, float t, float range, float exponent);

} // namespace pi
