#include "sampling/sampler_options.hpp"

#include <cmath>

#include "support/error.hpp"

namespace pi {
namespace {

void require_finite(float v, const char* name) {
    if (!std::isfinite(v)) fail(status::invalid_argument, name, " must be finite (got ", v, ")");
}

void require_in(float v, float lo, bool lo_open, float hi, const char* name) {
    require_finite(v, name);
    if (v < lo || (lo_open && v == lo) || v > hi)
        fail(status::invalid_argument, name, " must be in ", lo_open ? "(" : "[", lo, ", ", hi,
             "] (got ", v, ")");
}

void require_at_least(float v, float lo, const char* name) {
    require_finite(v, name);
    if (v < lo) fail(status::invalid_argument, name, " must be >= ", lo, " (got ", v, ")");
}

void require_last_n(int32_t v, const char* name) {
    if (v < -1)
        fail(status::invalid_argument, name, " must be -1 (every token), 0 (off) or positive (got ",
             v, ")");
}

} // namespace

std::vector<sampler_stage> default_stage_order() {
    return {sampler_stage::penalties, sampler_stage::dry,        sampler_stage::top_k,
            sampler_stage::typical,   sampler_stage::top_p,      sampler_stage::min_p,
            sampler_stage::xtc,       sampler_stage::temperature};
}

const char* stage_name(sampler_stage s) {
    switch (s) {
    case sampler_stage::penalties:
        return "penalties";
    case sampler_stage::dry:
        return "dry";
    case sampler_stage::top_k:
        return "top_k";
    case sampler_stage::typical:
        return "typical";
    case sampler_stage::top_p:
        return "top_p";
    case sampler_stage::min_p:
        return "min_p";
    case sampler_stage::xtc:
        return "xtc";
    case sampler_stage::temperature:
        return "temperature";
    }
    return "unknown";
}

void validate(const sampler_options& o, int32_t n_vocab) {
    require_finite(o.temperature, "temperature");
    require_in(o.top_p, 0.0f, true, 1.0f, "top_p");
    require_in(o.min_p, 0.0f, false, 1.0f, "min_p");
    require_in(o.typical_p, 0.0f, true, 1.0f, "typical_p");
    require_at_least(o.dynatemp_range, 0.0f, "dynatemp_range");
    require_at_least(o.dynatemp_exponent, 0.0f, "dynatemp_exponent");
    require_last_n(o.penalty_last_n, "penalty_last_n");
    require_finite(o.repeat_penalty, "repeat_penalty");
    if (o.repeat_penalty <= 0.0f)
        fail(status::invalid_argument, "repeat_penalty must be positive (1: off; got ",
             o.repeat_penalty, ")");
    require_finite(o.frequency_penalty, "frequency_penalty");
    require_finite(o.presence_penalty, "presence_penalty");
    require_at_least(o.dry_multiplier, 0.0f, "dry_multiplier");
    require_at_least(o.dry_base, 1.0f, "dry_base");
    if (o.dry_allowed_length < 0)
        fail(status::invalid_argument, "dry_allowed_length must not be negative (got ",
             o.dry_allowed_length, ")");
    require_last_n(o.dry_penalty_last_n, "dry_penalty_last_n");
    for (size_t i = 0; i < o.dry_sequence_breakers.size(); ++i)
        if (o.dry_sequence_breakers[i].empty())
            fail(status::invalid_argument, "dry_sequence_breakers[", i, "] is empty");
    const bool dry_on = o.dry_multiplier != 0.0f && o.dry_penalty_last_n != 0;
    if (dry_on && !o.dry_sequence_breakers.empty() && n_vocab <= 0)
        fail(status::invalid_argument,
             "DRY sequence breakers need the token texts: the sampler needs a model "
             "(or no breakers)");
    require_in(o.xtc_probability, 0.0f, false, 1.0f, "xtc_probability");
    require_in(o.xtc_threshold, 0.0f, false, 1.0f, "xtc_threshold");
    if (o.mirostat < 0 || o.mirostat > 2)
        fail(status::invalid_argument, "mirostat must be 0 (off), 1 or 2 (got ", o.mirostat, ")");
    require_at_least(o.mirostat_tau, 0.0f, "mirostat_tau");
    require_at_least(o.mirostat_eta, 0.0f, "mirostat_eta");
    if (o.min_keep < 0)
        fail(status::invalid_argument, "min_keep must not be negative (got ", o.min_keep, ")");
    if (!o.logit_biases.empty() && n_vocab <= 0)
        fail(status::invalid_argument,
             "a logit bias needs the vocabulary size: the sampler needs a model");
    for (size_t i = 0; i < o.logit_biases.size(); ++i) {
        const logit_bias& b = o.logit_biases[i];
        if (b.token < 0 || b.token >= n_vocab)
            fail(status::invalid_argument, "logit_bias[", i, "].token = ", b.token,
                 " is outside the vocabulary of ", n_vocab, " tokens");
        if (std::isnan(b.bias) || b.bias == INFINITY)
            fail(status::invalid_argument, "logit_bias[", i,
                 "].bias must be finite or -infinity (got ", b.bias, ")");
    }
    bool seen[n_sampler_stages] = {};
    for (size_t i = 0; i < o.stages.size(); ++i) {
        const auto id = static_cast<int32_t>(o.stages[i]);
        if (id < 0 || id >= n_sampler_stages)
            fail(status::invalid_argument, "stages[", i, "] = ", id, " is not a sampler stage (0..",
                 n_sampler_stages - 1, ")");
        if (seen[id])
            fail(status::invalid_argument, "stages[", i, "]: ", stage_name(o.stages[i]),
                 " is listed twice");
        seen[id] = true;
    }
}

} // namespace pi
