#include "sampling/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "support/error.hpp"

namespace pi {

token_logprobs top_logprobs(std::span<const float> logits, int32_t chosen, int32_t n_top) {
    if (logits.empty()) fail(status::invalid_argument, "no logits for the log-probabilities");
    if (chosen < 0 || static_cast<size_t>(chosen) >= logits.size())
        fail(status::invalid_argument, "token ", chosen, " is outside the ", logits.size(),
             " logits");
    if (n_top < 0) fail(status::invalid_argument, "n_top must not be negative (got ", n_top, ")");
    float max_logit = -INFINITY;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (std::isnan(logits[i])) fail(status::invalid_argument, "logit of token ", i, " is NaN");
        max_logit = std::max(max_logit, logits[i]);
    }
    double sum = 0.0;
    for (float l : logits)
        sum += std::exp(static_cast<double>(l) - max_logit);
    const double log_z = static_cast<double>(max_logit) + std::log(sum);
    const auto logprob = [&](int32_t id) {
        return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_z);
    };

    token_logprobs out;
    out.chosen = {chosen, logprob(chosen)};
    const size_t n = std::min(static_cast<size_t>(n_top), logits.size());
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](int32_t a, int32_t b) {
                          const float la = logits[static_cast<size_t>(a)];
                          const float lb = logits[static_cast<size_t>(b)];
                          return la > lb || (la == lb && a < b);
                      });
    out.top.reserve(n);
    for (size_t i = 0; i < n; ++i)
        out.top.push_back({ids[i], logprob(ids[i])});
    return out;
}

} // namespace pi
