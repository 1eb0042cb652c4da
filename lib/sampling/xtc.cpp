#include "sampling/xtc.hpp"

#include "sampling/candidates.hpp"
#include "sampling/random.hpp"

namespace pi {

void exclude_top_choices(candidate_list& list, float probability, float threshold, int32_t min_keep,
                         std::mt19937& rng) {
    // Above 0.5 at most one token can pass the threshold, and XTC always leaves one of them.
    if (probability <= 0.0f || threshold > 0.5f || list.tokens.size() < 2) return;
    if (uniform24(rng) >= probability) return;
    softmax(list);
    size_t last_above = 0; // the least likely token that still passes the threshold
    for (size_t i = 0; i < list.tokens.size() && list.tokens[i].p >= threshold; ++i)
        last_above = i;
    if (last_above == 0 || list.tokens.size() - last_above < static_cast<size_t>(min_keep)) return;
    list.tokens.erase(list.tokens.begin(),
                      list.tokens.begin() + static_cast<std::ptrdiff_t>(last_above));
}

} // namespace pi
