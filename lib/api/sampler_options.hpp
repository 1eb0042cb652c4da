#pragma once
// pi_sampler_params as the sampling room's options.
#include "powerinfer.h"
#include "sampling/sampler.hpp"

namespace pi::api {

// PI_SEED_RANDOM becomes a time-based seed.
uint32_t resolve_seed(uint32_t seed);
sampler_options to_sampler_options(const pi_sampler_params& p);

} // namespace pi::api
