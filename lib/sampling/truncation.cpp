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
    if (!list.sorted) {
        std::partial_sort(list.tokens.begin(),
                          list.tokens.begin() + static_cast<std::ptrdiff_t>(keep),
                          list.tokens.end(), logit_order);
        list.sorted = true;
    }
    list.tokens.resize(keep);
}

void top_p(candidate_list& list, float p, int32_t min_keep) {
    if (p >= 1.0f || list.tokens.empty()) return;
    softmax(list);
    double cumulative = 0.0;
    for (size_t i = 0; i < list.tokens.size(); ++i) {
        cumulative += list.tokens[i].p;
        if (cumulative >= p && i + 1 >= static_cast<size_t>(min_keep)) {
            list.tokens.resize(i + 1);
            return;
        }
    }
}

void min_p(candidate_list& list, float p, int32_t min_keep) {
    if (p <= 0.0f || list.tokens.empty()) return;
    sort_by_logit(list);
    // p_i >= p * p_max  <=>  logit_i >= logit_max + log(p): no softmax needed.
    const float min_logit = list.tokens.front().logit + std::log(p);
    size_t keep = 1;
    while (keep < list.tokens.size() &&
           (list.tokens[keep].logit >= min_logit || keep < static_cast<size_t>(min_keep)))
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
