#pragma once
// The sampler chain (docs/sampling.md): logit bias, the constraint (a grammar), the ordered
// stages (penalties, DRY, top-k, typical, top-p, min-p, XTC, temperature by default), then the
// pick: greedy, mirostat v1/v2 or a seeded draw. It keeps the state that makes a generation
// continue: the accepted tokens, mirostat's mu and the random generator.
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "sampling/penalties.hpp"
#include "sampling/sampler_options.hpp"
#include "sampling/token_candidates.hpp"
#include "sampling/token_history.hpp"

namespace pi {

class tokenizer;
class dry_penalty;

class sampler {
  public:
    // Throws pi::error(invalid_argument) on bad options. `vocab` (may be NULL: no model) gives the
    // vocabulary size and the token texts DRY matches breakers against; it is not kept. The
    // sampler owns the constraint.
    explicit sampler(const sampler_options& options, const tokenizer* vocab = nullptr,
                     std::unique_ptr<token_constraint> constraint = nullptr);
    ~sampler();
    sampler(sampler&&) noexcept;
    sampler& operator=(sampler&&) noexcept;

    // Runs the chain on one position's logits and accepts the chosen token (history, mirostat,
    // constraint). Throws invalid_argument on empty, NaN or +infinity logits, a logit count other
    // than the model's vocabulary, or when the bias and the constraint leave no token.
    int32_t sample(std::span<const float> logits);
    // Records a token the sampler did not choose (a prompt token) in the history only.
    void accept(int32_t token);
    // Forgets the history and the constraint's progress, resets mu and reseeds the generator.
    void reset();

    // The mutable state (history, mu, generator, the tokens the constraint accepted) appended to
    // `out`. load() restores it; a blob of another configuration, another version or a truncated
    // one is pi::error(format) naming the reason, with the sampler untouched.
    void save(std::vector<uint8_t>& out) const;
    void load(std::span<const uint8_t> blob);

    const sampler_options& options() const noexcept { return options_; }
    int32_t n_vocab() const noexcept { return n_vocab_; } // 0: no model
    float mirostat_mu() const noexcept { return mu_; }
    std::vector<int32_t> history() const { return history_.tokens(); }

  private:
    struct choice {
        int32_t token = 0;
        float mu = 0.0f;
    };
    choice run_chain(std::span<const float> logits, bool constrained);
    void run_stages(candidate_list& list);
    choice pick(candidate_list& list, size_t n_logits);
    bool constraint_allows(const token_candidate& c);
    uint64_t fingerprint() const;

    sampler_options options_;
    int32_t n_vocab_ = 0;
    std::unique_ptr<token_constraint> constraint_;
    repetition_penalties penalties_;
    std::unique_ptr<dry_penalty> dry_;
    token_history history_;
    std::vector<int32_t> constrained_tokens_; // replayed into the constraint by load()
    float mu_ = 0.0f;
    std::mt19937 rng_;
    candidate_list candidates_; // reused across calls
    candidate_list probe_;      // the one chosen token the constraint checks, reused
};

} // namespace pi
