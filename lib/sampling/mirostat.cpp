#include "sampling/mirostat.hpp"

#include <algorithm>
#include <cmath>

#include "sampling/candidates.hpp"
#include "sampling/pick.hpp"
#include "sampling/truncation.hpp"

namespace pi {
namespace {

mirostat_pick draw_and_learn(candidate_list& list, float tau, float eta, float mu,
                             std::mt19937& rng) {
    const size_t index = pick_random(list, rng);
    const float surprise = -std::log2(list.tokens[index].p);
    return {index, mu - eta * (surprise - tau)};
}

} // namespace

mirostat_pick mirostat_v1(candidate_list& list, int32_t n_vocab, float tau, float eta, int32_t m,
                          float mu, std::mt19937& rng) {
    normalize(list);
    // Only the m most likely need to be in order.
    const size_t n = std::min(static_cast<size_t>(m), list.tokens.size());
    sort_head(list, n);
    double sum_tb = 0.0, sum_tt = 0.0;
    for (size_t i = 0; i + 1 < n; ++i) {
        const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
        const double b = std::log(static_cast<double>(list.tokens[i].p) / list.tokens[i + 1].p);
        sum_tb += t * b;
        sum_tt += t * t;
    }
    if (sum_tt > 0.0 && std::isfinite(sum_tb)) {
        const double s_hat = sum_tb / sum_tt;
        const double epsilon = s_hat - 1.0;
        const double k = std::pow(epsilon * std::pow(2.0, static_cast<double>(mu)) /
                                      (1.0 - std::pow(static_cast<double>(n_vocab), -epsilon)),
                                  1.0 / s_hat);
        // A NaN or huge k (a flat head) keeps everything.
        if (k < static_cast<double>(list.tokens.size()))
            top_k(list, std::max(static_cast<int32_t>(k), 1), 1);
    }
    return draw_and_learn(list, tau, eta, mu, rng);
}

mirostat_pick mirostat_v2(candidate_list& list, float tau, float eta, float mu, std::mt19937& rng) {
    normalize(list);
    // Surprise falls as p rises: the kept set is a head of the sorted order, found unsorted.
    const size_t best = pick_greedy(list);
    const token_candidate top = list.tokens[best];
    std::erase_if(list.tokens, [&](const token_candidate& c) { return -std::log2(c.p) > mu; });
    if (list.tokens.empty()) list.tokens.push_back(top);
    return draw_and_learn(list, tau, eta, mu, rng);
}

} // namespace pi
