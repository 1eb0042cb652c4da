#include <vector>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "api/sampler_options.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

pi_status create(const pi_model* model, const pi_sampler_params* params, pi_sampler** out) {
    require(out, "out");
    *out = nullptr;
    const pi_sampler_params p =
        api::read_params(params, pi_sampler_default_params(), "pi_sampler_params");
    auto handle = std::make_unique<pi_sampler>();
    handle->impl = api::make_sampler(p, model ? &model->impl->vocab() : nullptr);
    *out = handle.release();
    return PI_OK;
}

} // namespace

extern "C" {

static pi_sampler_params sampler_defaults() {
    const sampler_scalars d; // no allocation: an init function cannot fail
    pi_sampler_params p{};
    p.struct_size = sizeof(p);
    p.temperature = d.temperature;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.seed = PI_SEED_RANDOM;
    p.min_p = d.min_p;
    p.typical_p = d.typical_p;
    p.dynatemp_range = d.dynatemp_range;
    p.dynatemp_exponent = d.dynatemp_exponent;
    p.penalty_last_n = d.penalty_last_n;
    p.repeat_penalty = d.repeat_penalty;
    p.frequency_penalty = d.frequency_penalty;
    p.presence_penalty = d.presence_penalty;
    p.dry_multiplier = d.dry_multiplier;
    p.dry_base = d.dry_base;
    p.dry_allowed_length = d.dry_allowed_length;
    p.dry_penalty_last_n = d.dry_penalty_last_n;
    p.xtc_probability = d.xtc_probability;
    p.xtc_threshold = d.xtc_threshold;
    p.mirostat = d.mirostat;
    p.mirostat_tau = d.mirostat_tau;
    p.mirostat_eta = d.mirostat_eta;
    p.min_keep = d.min_keep;
    return p;
}

pi_status pi_sampler_params_init(pi_sampler_params* params, size_t struct_size) {
    return guard([&] {
        api::fill_defaults(params, struct_size, sampler_defaults(), "pi_sampler_params");
        return PI_OK;
    });
}

pi_status pi_sampler_create(const pi_sampler_params* params, pi_sampler** out) {
    return guard([&] { return create(nullptr, params, out); });
}

pi_status pi_sampler_create_for_model(const pi_model* model, const pi_sampler_params* params,
                                      pi_sampler** out) {
    return guard([&] {
        require(model, "model");
        return create(model, params, out);
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
        if (n_vocab <= 0)
            fail(status::invalid_argument, "n_vocab must be positive (got ", n_vocab, ")");
        *out_token = s->impl->sample(std::span<const float>(logits, static_cast<size_t>(n_vocab)));
        return PI_OK;
    });
}

pi_status pi_sampler_accept(pi_sampler* s, pi_token token) {
    return guard([&] {
        require(s, "sampler");
        s->impl->accept(token);
        return PI_OK;
    });
}

void pi_sampler_reset(pi_sampler* s) {
    if (!s) return;
    guard([&] {
        s->impl->reset();
        return PI_OK;
    });
}

pi_status pi_sampler_state_save(const pi_sampler* s, void* buf, size_t capacity, size_t* len) {
    return guard([&] {
        require(s, "sampler");
        require(len, "len");
        if (!buf && capacity > 0)
            fail(status::invalid_argument, "buf is NULL but capacity is ", capacity);
        std::vector<uint8_t> state;
        s->impl->save(state);
        *len = state.size();
        if (!buf && capacity == 0) return PI_OK;
        if (capacity < state.size())
            fail(status::invalid_argument, "the sampler state needs ", state.size(),
                 " bytes; the buffer holds ", capacity);
        std::copy(state.begin(), state.end(), static_cast<uint8_t*>(buf));
        return PI_OK;
    });
}

pi_status pi_sampler_state_load(pi_sampler* s, const void* data, size_t len) {
    return guard([&] {
        require(s, "sampler");
        require(data, "data");
        s->impl->load(std::span<const uint8_t>(static_cast<const uint8_t*>(data), len));
        return PI_OK;
    });
}

} // extern "C"
