#pragma once
// What every sampler stage works on: the candidate tokens of one step, and the interface of a
// stage that constrains which tokens may follow (the grammar, lib/grammar).
#include <cstdint>
#include <span>
#include <vector>

namespace pi {

struct token_candidate {
    int32_t id = 0;
    float logit = 0.0f;
    float p = 0.0f; // probability, valid only after a stage that computes it (softmax)
};

// The candidates of one sampling step. `sorted` says whether they are in descending logit order;
// a stage that keeps a subset shrinks `tokens`.
struct candidate_list {
    std::vector<token_candidate> tokens;
    bool sorted = false;
};

// A stage that forbids tokens (sets their logit to -infinity) given the tokens accepted so far.
class token_constraint {
  public:
    virtual ~token_constraint() = default;
    // Forbids the candidates that may not come next.
    virtual void apply(candidate_list& candidates) const = 0;
    // Advances past a chosen token; throws pi::error(invalid_argument) if it was forbidden.
    virtual void accept(int32_t token) = 0;
    // Back to the state before any token was accepted.
    virtual void reset() = 0;
    // Whether generation may stop here (end-of-generation tokens are allowed).
    virtual bool may_end() const = 0;
};

} // namespace pi
