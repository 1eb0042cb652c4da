#include "sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sampling/candidates.hpp"
#include "sampling/dry.hpp"
#include "sampling/logit_bias.hpp"
#include "sampling/mirostat.hpp"
#include "sampling/pick.hpp"
#include "sampling/temperature.hpp"
#include "sampling/truncation.hpp"
#include "sampling/xtc.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {
namespace {

// llama.cpp's m for mirostat v1: the number of most likely tokens that estimate the exponent.
constexpr int32_t mirostat_m = 100;

bool has_stage(const sampler_options& o, sampler_stage s) {
    return std::find(o.stages.begin(), o.stages.end(), s) != o.stages.end();
}

penalty_options penalties_of(const sampler_options& o) {
    return {o.penalty_last_n, o.repeat_penalty, o.frequency_penalty, o.presence_penalty};
}

dry_options dry_of(const sampler_options& o) {
    return {o.dry_multiplier, o.dry_base, o.dry_allowed_length, o.dry_penalty_last_n};
}

bool penalties_run(const sampler_options& o) {
    return has_stage(o, sampler_stage::penalties) && penalties_of(o).active();
}

bool dry_runs(const sampler_options& o) {
    return o.mirostat == 0 && has_stage(o, sampler_stage::dry) && dry_of(o).active();
}

// How many accepted tokens the stages that run look back at.
size_t history_capacity(const sampler_options& o) {
    size_t capacity = 0;
    const auto need = [&](int32_t last_n) {
        capacity =
            last_n < 0 ? token_history::unbounded : std::max(capacity, static_cast<size_t>(last_n));
    };
    if (penalties_run(o)) need(o.penalty_last_n);
    if (dry_runs(o) && capacity != token_history::unbounded) need(o.dry_penalty_last_n);
    return capacity;
}

} // namespace

sampler::sampler(const sampler_options& options, const tokenizer* vocab,
                 std::unique_ptr<token_constraint> constraint)
    : options_(options), n_vocab_(vocab ? vocab->n_tokens() : 0),
      constraint_(std::move(constraint)), penalties_(penalties_of(options)),
      history_(history_capacity(options)), mu_(2.0f * options.mirostat_tau), rng_(options.seed) {
    validate(options_, n_vocab_);
    if (dry_runs(options_)) {
        std::vector<std::string> pieces;
        if (!options_.dry_sequence_breakers.empty()) {
            pieces.resize(static_cast<size_t>(n_vocab_));
            for (int32_t id = 0; id < n_vocab_; ++id)
                pieces[static_cast<size_t>(id)] = vocab->piece(id);
        }
        dry_ = std::make_unique<dry_penalty>(dry_of(options_), options_.dry_sequence_breakers,
                                             std::move(pieces));
    }
}

sampler::~sampler() = default;
sampler::sampler(sampler&&) noexcept = default;
sampler& sampler::operator=(sampler&&) noexcept = default;

int32_t sampler::sample(std::span<const float> logits) {
    if (n_vocab_ > 0 && logits.size() != static_cast<size_t>(n_vocab_))
        fail(status::invalid_argument, "got ", logits.size(), " logits for a vocabulary of ",
             n_vocab_, " tokens");
    choice c = run_chain(logits, false);
    if (constraint_ && !constraint_allows({c.token, logits[static_cast<size_t>(c.token)], 0.0f}))
        c = run_chain(logits, true);
    if (constraint_) {
        constraint_->accept(c.token);
        constrained_tokens_.push_back(c.token);
    }
    history_.push(c.token);
    if (options_.mirostat != 0) mu_ = c.mu;
    return c.token;
}

bool sampler::constraint_allows(const token_candidate& c) {
    probe_.tokens.assign(1, c);
    probe_.sorted = false;
    constraint_->apply(probe_);
    return !probe_.tokens.empty() && probe_.tokens.front().logit != -INFINITY;
}

sampler::choice sampler::run_chain(std::span<const float> logits, bool constrained) {
    candidate_list& list = candidates_;
    fill_candidates(list, logits);
    apply_logit_bias(list, options_.logit_biases);
    if (constrained) constraint_->apply(list);
    drop_forbidden(list);
    if (list.tokens.empty())
        fail(status::invalid_argument, constrained ? "the grammar and the logit bias allow no token"
                                                   : "the logit bias forbids every token");
    run_stages(list);
    return pick(list, logits.size());
}

void sampler::run_stages(candidate_list& list) {
    const sampler_options& o = options_;
    if (o.mirostat != 0) {
        if (penalties_run(o)) penalties_.apply(list, history_);
        if (o.temperature > 0.0f) {
            apply_temperature(list, o.temperature);
        } else {
            keep_most_likely(list);
        }
        return;
    }
    for (sampler_stage s : o.stages) {
        switch (s) {
        case sampler_stage::penalties:
            penalties_.apply(list, history_);
            break;
        case sampler_stage::dry:
            if (dry_) dry_->apply(list, history_);
            break;
        case sampler_stage::top_k:
            top_k(list, o.top_k, o.min_keep);
            break;
        case sampler_stage::typical:
            typical(list, o.typical_p, o.min_keep);
            break;
        case sampler_stage::top_p:
            top_p(list, o.top_p, o.min_keep);
            break;
        case sampler_stage::min_p:
            min_p(list, o.min_p, o.min_keep);
            break;
        case sampler_stage::xtc:
            exclude_top_choices(list, o.xtc_probability, o.xtc_threshold, o.min_keep, rng_);
            break;
        case sampler_stage::temperature:
            apply_dynamic_temperature(list, o.temperature, o.dynatemp_range, o.dynatemp_exponent);
            break;
        }
    }
}

sampler::choice sampler::pick(candidate_list& list, size_t n_logits) {
    const sampler_options& o = options_;
    if (o.mirostat == 1) {
        const mirostat_pick m = mirostat_v1(list, static_cast<int32_t>(n_logits), o.mirostat_tau,
                                            o.mirostat_eta, mirostat_m, mu_, rng_);
        return {list.tokens[m.index].id, m.mu};
    }
    if (o.mirostat == 2) {
        const mirostat_pick m = mirostat_v2(list, o.mirostat_tau, o.mirostat_eta, mu_, rng_);
        return {list.tokens[m.index].id, m.mu};
    }
    const size_t index = o.temperature <= 0.0f ? pick_greedy(list) : pick_random(list, rng_);
    return {list.tokens[index].id, mu_};
}

void sampler::accept(int32_t token) {
    if (token < 0 || (n_vocab_ > 0 && token >= n_vocab_))
        fail(status::invalid_argument, "token ", token, " is outside the vocabulary",
             n_vocab_ > 0 ? concat(" of ", n_vocab_, " tokens") : std::string());
    history_.push(token);
}

void sampler::reset() {
    history_.clear();
    constrained_tokens_.clear();
    if (constraint_) constraint_->reset();
    mu_ = 2.0f * options_.mirostat_tau;
    rng_.seed(options_.seed);
}

} // namespace pi
