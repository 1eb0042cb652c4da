#include "api/sampler_options.hpp"

#include <chrono>

namespace pi::api {

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
    return o;
}

} // namespace pi::api
