#include "sampling/truncation.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "sampling/candidates.hpp"

namespace pi {

void top_k(candidate_list& list, int32_t k, int32_t min_keep) {
    if (k <= 0) return;
    const size_t keep = std::min(static_cast<size_t>(std::max(k, min_keep)), list.tokens.size());
    sort_head(list, keep);
    list.tokens.resize(keep);
    list.sorted = true;
}

void top_p(candidate_list& list, float p, int32_t min_keep) {
    if (p >= 1.0f || list.tokens.empty()) return;
    normalize(list);
    // The head is usually short: sort growing prefixes instead of the whole vocabulary.
    const size_t n = list.tokens.size();
    const size_t least = static_cast<size_t>(std::max(min_keep, 1));
    double cumulative = 0.0;
    size_t summed = 0;
    for (size_t prefix = std::min<size_t>(64, n);; prefix = std::min(prefix * 2, n)) {
        sort_head(list, prefix);
        for (; summed < prefix; ++summed) {
            cumulative += list.tokens[summed].p;
            if (cumulative >= p && summed + 1 >= least) {
                list.tokens.resize(summed + 1);
                list.sorted = true;
                return;
            }
        }
        if (prefix == n) return;
    }
}

void min_p(candidate_list& list, float p, int32_t min_keep) {
    if (p <= 0.0f || list.tokens.empty()) return;
    const size_t least = static_cast<size_t>(std::max(min_keep, 1));
    // p_i >= p * p_max  <=>  logit_i >= logit_max + log(p): no softmax needed.
    if (!list.sorted) {
        float max_logit = list.tokens.front().logit;
        for (const token_candidate& c : list.tokens)
            max_logit = std::max(max_logit, c.logit);
        const float min_logit = max_logit + std::log(p);
        size_t passing = 0;
        for (const token_candidate& c : list.tokens)
            passing += c.logit >= min_logit ? 1 : 0;
        if (passing >= least) {
            std::erase_if(list.tokens,
                          [&](const token_candidate& c) { return c.logit < min_logit; });
            return;
        }
        sort_by_logit(list);
    }
    const float min_logit = list.tokens.front().logit + std::log(p);
    size_t keep = 1;
    while (keep < list.tokens.size() && (list.tokens[keep].logit >= min_logit || keep < least))
        ++keep;
    list.tokens.resize(keep);
}

void typical(candidate_list& list, float p, int32_t min_keep) {
    if (p >= 1.0f || list.tokens.empty()) return;
    softmax(list);
    const double h = entropy(list);
    std::vector<double> distance(list.tokens.size());
    for (size_t i = 0; i < list.tokens.size(); ++i) {
        const double pi = list.tokens[i].p;
        distance[i] = pi > 0.0 ? std::abs(-std::log(pi) - h) : INFINITY;
    }
    std::vector<size_t> order(list.tokens.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return distance[a] < distance[b] ||
               (distance[a] == distance[b] && list.tokens[a].id < list.tokens[b].id);
    });
    size_t keep = order.size();
    double cumulative = 0.0;
    for (size_t i = 0; i < order.size(); ++i) {
        cumulative += list.tokens[order[i]].p;
        if (cumulative > p && i + 1 >= static_cast<size_t>(min_keep)) {
            keep = i + 1;
            break;
        }
    }
    std::vector<token_candidate> kept(keep);
    for (size_t i = 0; i < keep; ++i)
        kept[i] = list.tokens[order[i]];
    list.tokens = std::move(kept);
    list.sorted = false;
}

} // namespace pi
