#include "sampling/pick.hpp"

#include "sampling/candidates.hpp"
#include "sampling/random.hpp"

namespace pi {

size_t pick_greedy(const candidate_list& list) {
    size_t best = 0;
    for (size_t i = 1; i < list.tokens.size(); ++i)
        if (logit_order(list.tokens[i], list.tokens[best])) best = i;
    return best;
}

void keep_most_likely(candidate_list& list) {
    const token_candidate best = list.tokens[pick_greedy(list)];
    list.tokens.assign(1, best);
    list.sorted = true;
}

size_t pick_random(candidate_list& list, std::mt19937& rng) {
    normalize(list);
    double sum = 0.0;
    for (const token_candidate& c : list.tokens)
        sum += c.p;
    const double u = uniform24(rng) * sum;
    double acc = 0.0;
    for (size_t i = 0; i < list.tokens.size(); ++i) {
        acc += list.tokens[i].p;
        if (u < acc) return i;
    }
    return list.tokens.size() - 1;
}

} // namespace pi
