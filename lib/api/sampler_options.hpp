#pragma once
// pi_sampler_params as the sampling room's options, and the whole chain made from them.
#include <memory>

#include "powerinfer.h"
#include "sampling/sampler.hpp"

namespace pi {
class tokenizer;
}

namespace pi::api {

// PI_SEED_RANDOM becomes a time-based seed.
uint32_t resolve_seed(uint32_t seed);
// Every field but the grammar; throws invalid_argument for a NULL array with a nonzero count.
sampler_options to_sampler_options(const pi_sampler_params& p);
// The chain with its grammar (grammar or json_schema) compiled for vocab. vocab NULL (no model):
// a grammar, a JSON schema, a logit bias and DRY breakers are invalid_argument "needs a model".
std::unique_ptr<sampler> make_sampler(const pi_sampler_params& p, const tokenizer* vocab);

} // namespace pi::api
