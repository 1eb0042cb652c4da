#pragma once
// Repetition, frequency and presence penalties over the last N accepted tokens (llama.cpp's).
#include <cstdint>
#include <vector>

#include "sampling/token_candidates.hpp"
#include "sampling/token_history.hpp"

namespace pi {

struct penalty_options {
    int32_t last_n = 64;    // 0: off; -1: the whole history
    float repeat = 1.0f;    // a positive logit is divided by it, a negative one multiplied
    float frequency = 0.0f; // subtracted once per occurrence
    float presence = 0.0f;  // subtracted once if the token occurred at all
    bool active() const noexcept {
        return last_n != 0 && (repeat != 1.0f || frequency != 0.0f || presence != 0.0f);
    }
};

class repetition_penalties {
  public:
    explicit repetition_penalties(const penalty_options& options) : options_(options) {}
    void apply(candidate_list& list, const token_history& history);

  private:
    penalty_options options_;
    std::vector<int32_t> count_; // per token id, zero outside apply()
};

} // namespace pi
