#include "api/sampler_options.hpp"

#include <chrono>
#include <string>

#include "grammar/grammar_constraint.hpp"
#include "grammar/json_schema.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi::api {
namespace {

template <typename T> void require_array(const T* p, size_t n, const char* name) {
    if (!p && n > 0)
        fail(status::invalid_argument, "pi_sampler_params.", name, " is NULL but its count is ", n);
}

// The grammar the params ask for, or none.
std::unique_ptr<token_constraint> make_constraint(const pi_sampler_params& p,
                                                  const tokenizer* vocab) {
    if (!p.grammar && !p.json_schema) return nullptr;
    if (p.grammar && p.json_schema)
        fail(status::invalid_argument,
             "pi_sampler_params has both a grammar and a json_schema; give one");
    if (!vocab)
        fail(status::invalid_argument, "a ", p.grammar ? "grammar" : "JSON schema",
             " needs the token texts: the sampler needs a model (pi_sampler_create_for_model)");
    if (p.json_schema)
        return make_grammar_constraint(json_schema_to_gbnf(p.json_schema), "root", *vocab);
    return make_grammar_constraint(p.grammar, p.grammar_root ? p.grammar_root : "root", *vocab);
}

} // namespace

uint32_t resolve_seed(uint32_t seed) {
    if (seed != PI_SEED_RANDOM) return seed;
    return static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

sampler_options to_sampler_options(const pi_sampler_params& p) {
    sampler_options o;
    o.temperature = p.temperature;
    o.top_k = p.top_k;
    o.top_p = p.top_p;
    o.seed = resolve_seed(p.seed);
    o.min_p = p.min_p;
    o.typical_p = p.typical_p;
    o.dynatemp_range = p.dynatemp_range;
    o.dynatemp_exponent = p.dynatemp_exponent;
    o.penalty_last_n = p.penalty_last_n;
    o.repeat_penalty = p.repeat_penalty;
    o.frequency_penalty = p.frequency_penalty;
    o.presence_penalty = p.presence_penalty;
    o.dry_multiplier = p.dry_multiplier;
    o.dry_base = p.dry_base;
    o.dry_allowed_length = p.dry_allowed_length;
    o.dry_penalty_last_n = p.dry_penalty_last_n;
    if (p.dry_sequence_breakers) {
        o.dry_sequence_breakers.clear();
        for (size_t i = 0; i < p.n_dry_sequence_breakers; ++i) {
            if (!p.dry_sequence_breakers[i])
                fail(status::invalid_argument, "pi_sampler_params.dry_sequence_breakers[", i,
                     "] is NULL");
            o.dry_sequence_breakers.emplace_back(p.dry_sequence_breakers[i]);
        }
    }
    o.xtc_probability = p.xtc_probability;
    o.xtc_threshold = p.xtc_threshold;
    o.mirostat = p.mirostat;
    o.mirostat_tau = p.mirostat_tau;
    o.mirostat_eta = p.mirostat_eta;
    o.min_keep = p.min_keep;
    require_array(p.logit_bias, p.n_logit_bias, "logit_bias");
    for (size_t i = 0; i < p.n_logit_bias; ++i)
        o.logit_biases.push_back({p.logit_bias[i].token, p.logit_bias[i].bias});
    if (p.stages) {
        o.stages.clear();
        for (size_t i = 0; i < p.n_stages; ++i)
            o.stages.push_back(static_cast<sampler_stage>(p.stages[i]));
    }
    return o;
}

std::unique_ptr<sampler> make_sampler(const pi_sampler_params& p, const tokenizer* vocab) {
    sampler_options o = to_sampler_options(p);
    if (p.json_schema) o.constraint_source = concat("json_schema:", p.json_schema);
    if (p.grammar)
        o.constraint_source =
            concat("grammar:", p.grammar_root ? p.grammar_root : "root", ":", p.grammar);
    validate(o, vocab ? vocab->n_tokens() : 0); // bad options before the grammar's cost
    return std::make_unique<sampler>(o, vocab, make_constraint(p, vocab));
}

} // namespace pi::api
