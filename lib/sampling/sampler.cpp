#include "sampling/sampler.hpp"

#include <algorithm>
#include <cmath>

#include "support/error.hpp"

namespace pi {

sampler::sampler(const sampler_options& options) : options_(options), rng_(options.seed) {
    if (!std::isfinite(options.temperature)) fail(status::invalid_argument, "temperature must be finite");
    if (!(options.top_p > 0.0f) || !std::isfinite(options.top_p))
        fail(status::invalid_argument, "top_p must be in (0, 1] (got ", options.top_p, ")");
}

int32_t sampler::sample(std::span<const float> logits) {
    if (logits.empty()) fail(status::invalid_argument, "no logits to sample from");
    const auto n = static_cast<int32_t>(logits.size());
    if (options_.temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; ++i)
            if (logits[static_cast<size_t>(i)] > logits[static_cast<size_t>(best)]) best = i;
        if (std::isnan(logits[static_cast<size_t>(best)])) fail(status::invalid_argument, "logits are NaN");
        return best;
    }

    candidates_.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        const float l = logits[static_cast<size_t>(i)];
        if (std::isnan(l)) fail(status::invalid_argument, "logit of token ", i, " is NaN");
        candidates_[static_cast<size_t>(i)] = {i, l};
    }
    const auto by_logit = [](const candidate& a, const candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    size_t keep = candidates_.size();
    if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < keep) {
        keep = static_cast<size_t>(options_.top_k);
        std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                          candidates_.end(), by_logit);
    } else {
        std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }

    // Top-p on the softmax of the raw logits, temperature applied afterwards (llama.cpp's
    // order, docs/sampling.md).
    probs_.resize(keep);
    const float max_logit = candidates_[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
        probs_[i] = std::exp(candidates_[i].logit - max_logit);
        sum += probs_[i];
    }
    if (options_.top_p < 1.0f) {
        double cumulative = 0.0;
        for (size_t i = 0; i < keep; ++i) {
            cumulative += probs_[i] / sum;
            if (cumulative >= options_.top_p) {
                keep = i + 1;
                break;
            }
        }
    }

    sum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
        probs_[i] = std::exp((candidates_[i].logit - max_logit) / options_.temperature);
        sum += probs_[i];
    }
    // 24 random bits give a uniform draw in [0, 1) that is identical on every standard library.
    const double u = static_cast<double>(rng_() >> 8) / static_cast<double>(1u << 24) * sum;
    double acc = 0.0;
    for (size_t i = 0; i < keep; ++i) {
        acc += probs_[i];
        if (u < acc) return candidates_[i].id;
    }
    return candidates_[keep - 1].id;
}

} // namespace pi
