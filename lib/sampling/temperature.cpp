#include "sampling/temperature.hpp"

#include <algorithm>
#include <cmath>

#include "sampling/candidates.hpp"
#include "sampling/pick.hpp"

namespace pi {

void apply_temperature(candidate_list& list, float t) {
    if (t <= 0.0f) return;
    for (token_candidate& c : list.tokens)
        c.logit /= t;
}

float dynamic_temperature(candidate_list& list, float t, float range, float exponent) {
    const float low = std::max(0.0f, t - range);
    const float high = t + range;
    if (list.tokens.size() <= 1) return high;
    normalize(list);
    const double max_entropy = std::log(static_cast<double>(list.tokens.size()));
    const double normalised = entropy(list) / max_entropy;
    return static_cast<float>(low +
                              (high - low) * std::pow(normalised, static_cast<double>(exponent)));
}

void apply_dynamic_temperature(candidate_list& list, float t, float range, float exponent) {
    if (t <= 0.0f) return;
    if (range <= 0.0f) return apply_temperature(list, t);
    if (list.tokens.size() <= 1) return;
    const float dynamic = dynamic_temperature(list, t, range, exponent);
    if (dynamic > 0.0f) return apply_temperature(list, dynamic);
    // A zero temperature is the greedy limit: only the most likely token stays.
    keep_most_likely(list);
}

} // namespace pi
