#pragma once
// Hand-made distributions for the stage tests.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "sampling/candidates.hpp"

namespace pi::test {

// Candidates 0..n-1 whose logits are log(p): their softmax is p.
inline candidate_list list_from_probs(const std::vector<double>& p) {
    candidate_list list;
    for (size_t i = 0; i < p.size(); ++i)
        list.tokens.push_back({static_cast<int32_t>(i), static_cast<float>(std::log(p[i])), 0.0f});
    return list;
}

inline std::vector<float> logits_from_probs(const std::vector<double>& p) {
    std::vector<float> out;
    for (double q : p)
        out.push_back(static_cast<float>(std::log(q)));
    return out;
}

// Token id -> renormalised probability of what the list still holds.
inline std::map<int32_t, double> kept_probs(candidate_list list) {
    softmax(list);
    std::map<int32_t, double> out;
    for (const token_candidate& c : list.tokens)
        out[c.id] = c.p;
    return out;
}

inline std::vector<int32_t> kept_ids(const candidate_list& list) {
    std::vector<int32_t> ids;
    for (const token_candidate& c : list.tokens)
        ids.push_back(c.id);
    return ids;
}

// The same ids in increasing order, for stages that keep a set without ordering it.
inline std::vector<int32_t> kept_set(const candidate_list& list) {
    std::vector<int32_t> ids = kept_ids(list);
    std::sort(ids.begin(), ids.end());
    return ids;
}

} // namespace pi::test
