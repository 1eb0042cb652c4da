#pragma once
// DRY ("don't repeat yourself", llama.cpp's): penalises the token that would extend a sequence
// already repeated in the history, exponentially in its length. A repetition may not reach back
// over a sequence breaker (docs/sampling.md).
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/token_candidates.hpp"
#include "sampling/token_history.hpp"

namespace pi {

struct dry_options {
    float multiplier = 0.0f; // 0: off
    float base = 1.75f;
    int32_t allowed_length = 2;
    int32_t last_n = -1; // 0: off; -1: the whole history
    bool active() const noexcept { return multiplier != 0.0f && last_n != 0; }
};

class dry_penalty {
  public:
    // pieces[id] is the text of token id; the breakers are matched against their concatenation.
    dry_penalty(const dry_options& options, std::vector<std::string> breakers,
                std::vector<std::string> pieces);
    void apply(candidate_list& list, const token_history& history);

  private:
    // How many of the newest `window` tokens lie after the last sequence breaker.
    size_t tokens_after_breaker(const token_history& history, size_t window);

    dry_options options_;
    std::vector<std::string> breakers_;
    std::vector<std::string> pieces_;
    std::string text_;                // the window's text, oldest first
    std::vector<size_t> piece_start_; // where each window token's piece starts in text_
    std::vector<int32_t> reversed_;   // the window, newest first
    std::vector<size_t> match_;       // Z-array of reversed_
    std::vector<int32_t> max_repeat_; // per token id: the longest repetition it would extend
};

} // namespace pi
