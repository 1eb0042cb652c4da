#include "sampling/candidates.hpp"

#include <algorithm>
#include <cmath>

#include "support/error.hpp"

namespace pi {

void fill_candidates(candidate_list& list, std::span<const float> logits) {
    if (logits.empty()) fail(status::invalid_argument, "no logits to sample from");
    list.tokens.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
        const float l = logits[i];
        if (std::isnan(l)) fail(status::invalid_argument, "logit of token ", i, " is NaN");
        if (l == INFINITY) fail(status::invalid_argument, "logit of token ", i, " is +infinity");
        list.tokens[i] = {static_cast<int32_t>(i), l, 0.0f};
    }
    list.sorted = false;
}

bool logit_order(const token_candidate& a, const token_candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void sort_by_logit(candidate_list& list) {
    if (list.sorted) return;
    std::sort(list.tokens.begin(), list.tokens.end(), logit_order);
    list.sorted = true;
}

void sort_head(candidate_list& list, size_t n) {
    if (list.sorted) return;
    std::partial_sort(list.tokens.begin(), list.tokens.begin() + static_cast<std::ptrdiff_t>(n),
                      list.tokens.end(), logit_order);
    list.sorted = n == list.tokens.size();
}

void normalize(candidate_list& list) {
    if (list.tokens.empty()) return;
    float max_logit = list.tokens.front().logit;
    if (!list.sorted)
        for (const token_candidate& c : list.tokens)
            max_logit = std::max(max_logit, c.logit);
    double sum = 0.0;
    for (token_candidate& c : list.tokens) {
        const double e = std::exp(static_cast<double>(c.logit) - max_logit);
        c.p = static_cast<float>(e);
        sum += e;
    }
    for (token_candidate& c : list.tokens)
        c.p = static_cast<float>(c.p / sum);
}

void softmax(candidate_list& list) {
    sort_by_logit(list);
    normalize(list);
}

void drop_forbidden(candidate_list& list) {
    std::erase_if(list.tokens, [](const token_candidate& c) { return c.logit == -INFINITY; });
}

double entropy(const candidate_list& list) {
    double h = 0.0;
    for (const token_candidate& c : list.tokens)
        if (c.p > 0.0f) h -= static_cast<double>(c.p) * std::log(static_cast<double>(c.p));
    return h;
}

} // namespace pi
