#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "api/sampler_options.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;
using pi::api::to_sampler_options;

extern "C" {

pi_sampler_params pi_sampler_default_params(void) {
    pi_sampler_params p{};
    p.struct_size = sizeof(p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.seed = PI_SEED_RANDOM;
    return p;
}

pi_status pi_sampler_create(const pi_sampler_params* params, pi_sampler** out) {
    return guard([&] {
        require(out, "out");
        *out = nullptr;
        const pi_sampler_params p =
            api::read_params(params, pi_sampler_default_params(), "pi_sampler_params");
        auto handle = std::make_unique<pi_sampler>();
        handle->impl = std::make_unique<sampler>(to_sampler_options(p));
        *out = handle.release();
        return PI_OK;
    });
}

void pi_sampler_free(pi_sampler* s) {
    delete s;
}

pi_status pi_sample(pi_sampler* s, const float* logits, int32_t n_vocab, pi_token* out_token) {
    return guard([&] {
        require(s, "sampler");
        require(logits, "logits");
        require(out_token, "out_token");
        if (n_vocab <= 0) fail(status::invalid_argument, "n_vocab must be positive");
        *out_token = s->impl->sample(std::span<const float>(logits, static_cast<size_t>(n_vocab)));
        return PI_OK;
    });
}

} // extern "C"
