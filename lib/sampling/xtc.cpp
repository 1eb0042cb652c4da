#include "sampling/xtc.hpp"

#include "sampling/candidates.hpp"
#include "sampling/random.hpp"

namespace pi {

void exclude_top_choices(candidate_list& list, float probability, float threshold, int32_t min_keep,
                         std::mt19937& rng) {
    // Above 0.5 at most one token can pass the threshold, and XTC always leaves one of them.
    if (probability <= 0.0f || threshold > 0.5f || list.tokens.size() < 2) return;
    if (uniform24(rng) >= probability) return;
    normalize(list);
    size_t above = 0;
    for (const token_candidate& c : list.tokens)
        above += c.p >= threshold ? 1 : 0;
    // All but the least likely of them go; min_keep may forbid it.
    if (above < 2 || list.tokens.size() - (above - 1) < static_cast<size_t>(min_keep)) return;
    sort_head(list, above);
    list.tokens.erase(list.tokens.begin(),
                      list.tokens.begin() + static_cast<std::ptrdiff_t>(above - 1));
}

} // namespace pi
