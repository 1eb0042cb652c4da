#include "sampling/penalties.hpp"

#include <algorithm>

namespace pi {

void repetition_penalties::apply(candidate_list& list, const token_history& history) {
    if (!options_.active() || history.size() == 0) return;
    const size_t n = history.window(options_.last_n);
    int32_t max_id = 0;
    for (const token_candidate& c : list.tokens)
        max_id = std::max(max_id, c.id);
    if (count_.size() <= static_cast<size_t>(max_id))
        count_.assign(static_cast<size_t>(max_id) + 1, 0);
    for (size_t i = 0; i < n; ++i) {
        const int32_t t = history.from_end(i);
        if (t >= 0 && static_cast<size_t>(t) < count_.size()) ++count_[static_cast<size_t>(t)];
    }
    for (token_candidate& c : list.tokens) {
        const int32_t count = count_[static_cast<size_t>(c.id)];
        if (count == 0) continue;
        c.logit = c.logit <= 0.0f ? c.logit * options_.repeat : c.logit / options_.repeat;
        c.logit -= static_cast<float>(count) * options_.frequency + options_.presence;
    }
    for (size_t i = 0; i < n; ++i) {
        const int32_t t = history.from_end(i);
        if (t >= 0 && static_cast<size_t>(t) < count_.size()) count_[static_cast<size_t>(t)] = 0;
    }
    list.sorted = false;
}

} // namespace pi
