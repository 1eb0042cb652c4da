#pragma once
// The basic sampler: greedy, or top-k -> top-p -> temperature -> draw with a seeded mt19937.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace pi {

struct sampler_options {
    float temperature = 0.8f; // <= 0: greedy
    int32_t top_k = 40;       // <= 0: all tokens
    float top_p = 0.95f;      // >= 1: off
    uint32_t seed = 0;
};

class sampler {
public:
    explicit sampler(const sampler_options& options); // throws invalid_argument on bad options
    int32_t sample(std::span<const float> logits);    // throws invalid_argument on empty/NaN input

private:
    struct candidate {
        int32_t id;
        float logit;
    };
    sampler_options options_;
    std::mt19937 rng_;
    std::vector<candidate> candidates_; // reused across calls: no allocation per token
    std::vector<float> probs_;
};

} // namespace pi
