#include "sampling/dry.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace pi {

dry_penalty::dry_penalty(const dry_options& options, std::vector<std::string> breakers,
                         std::vector<std::string> pieces)
    : options_(options), breakers_(std::move(breakers)), pieces_(std::move(pieces)) {}

size_t dry_penalty::tokens_after_breaker(const token_history& history, size_t window) {
    if (breakers_.empty()) return window;
    // Kept in members so that a step reuses the previous step's buffers.
    std::string& text = text_;
    std::vector<size_t>& start = piece_start_;
    text.clear();
    start.resize(window);
    for (size_t k = 0; k < window; ++k) {
        const int32_t t = history.from_end(window - 1 - k);
        start[k] = text.size();
        if (t >= 0 && static_cast<size_t>(t) < pieces_.size())
            text += pieces_[static_cast<size_t>(t)];
    }
    // The breaker occurrence that ends last: every token overlapping it is cut off, together
    // with everything before.
    size_t cut = 0;
    bool found = false;
    for (const std::string& b : breakers_) {
        const size_t at = text.rfind(b);
        if (at == std::string::npos) continue;
        cut = std::max(cut, at + b.size());
        found = true;
    }
    if (!found) return window;
    size_t after = 0;
    while (after < window && start[window - 1 - after] >= cut)
        ++after;
    return after;
}

void dry_penalty::apply(candidate_list& list, const token_history& history) {
    if (!options_.active()) return;
    const size_t window = history.window(options_.last_n);
    const size_t allowed = static_cast<size_t>(options_.allowed_length);
    if (window <= allowed) return;
    const size_t limit = tokens_after_breaker(history, window);
    if (limit < allowed) return;

    // match_[k] = length of the longest common prefix of reversed_ and reversed_[k..]: for k >= 1
    // the length of the repetition ending k tokens before the newest one (Z-algorithm).
    reversed_.resize(window);
    for (size_t i = 0; i < window; ++i)
        reversed_[i] = history.from_end(i);
    match_.assign(window, 0);
    for (size_t k = 1, left = 0, right = 0; k < window; ++k) {
        size_t z = k < right ? std::min(right - k, match_[k - left]) : 0;
        while (k + z < window && reversed_[z] == reversed_[k + z])
            ++z;
        match_[k] = z;
        if (k + z > right) {
            left = k;
            right = k + z;
        }
    }

    int32_t max_id = 0;
    for (const token_candidate& c : list.tokens)
        max_id = std::max(max_id, c.id);
    max_repeat_.assign(static_cast<size_t>(max_id) + 1, -1);
    bool any = false;
    for (size_t k = 1; k < window; ++k) {
        const size_t length = std::min(match_[k], limit);
        if (length < allowed) continue;
        // The token that followed the earlier occurrence would repeat it once more.
        const int32_t next = reversed_[k - 1];
        if (next < 0 || next > max_id) continue;
        int32_t& best = max_repeat_[static_cast<size_t>(next)];
        best = std::max(best, static_cast<int32_t>(length));
        any = true;
    }
    if (!any) return;
    for (token_candidate& c : list.tokens) {
        const int32_t length = max_repeat_[static_cast<size_t>(c.id)];
        if (length < 0) continue;
        const double penalty = options_.multiplier * std::pow(static_cast<double>(options_.base),
                                                              length - options_.allowed_length);
        c.logit -= static_cast<float>(std::min(penalty, static_cast<double>(FLT_MAX)));
    }
    list.sorted = false;
}

} // namespace pi
