
#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "api/sampler_options.hpp"
#include "engine/generate.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;
using pi::api::to_sampler_options;

namespace {

struct callback_bridge {
    pi_token_callback fn;
    void* user_data;
    static bool call(const char* text, size_t len, void* self) {
        auto* b = static_cast<callback_bridge*>(self);
        return b->fn(text, len, b->user_data) != 0;
    }
};

} // namespace

extern "C" {

pi_generate_params pi_generate_default_params(void) {
    pi_generate_params p{};
    p.struct_size = sizeof(p);
    p.max_tokens = 128;
    const pi_sampler_params basic = pi_sampler_default_params();
    p.sampling_struct_size = sizeof(pi_sampler_params);
    p.temperature = basic.temperature;
    p.top_k = basic.top_k;
    p.top_p = basic.top_p;
    p.seed = basic.seed;
    p.reuse_cache = 1;
    p.n_keep = 1;
    p.add_bos = 1;
    return p;
}

pi_status pi_generate(pi_context* ctx, const char* prompt, const pi_generate_params* params,
                      pi_generate_result* result) {
    return guard([&] {
        require(ctx, "ctx");
        require(prompt, "prompt");
        if (result && result->struct_size != sizeof(pi_generate_result))
            fail(status::invalid_argument,
                 "result->struct_size must be sizeof(pi_generate_result)");
        const pi_generate_params p =
            api::read_params(params, pi_generate_default_params(), "pi_generate_params");
        if (p.n_stop > 0 && !p.stop)
            fail(status::invalid_argument, "pi_generate_params.stop is NULL but n_stop > 0");
        generate_options o;
        o.max_tokens = p.max_tokens;
        pi_sampler_params basic = pi_sampler_default_params();
        basic.temperature = p.temperature;
        basic.top_k = p.top_k;
        basic.top_p = p.top_p;
        basic.seed = p.seed;
        o.sampling = to_sampler_options(basic);
        for (size_t i = 0; i < p.n_stop; ++i) {
            if (!p.stop[i]) fail(status::invalid_argument, "stop string ", i, " is NULL");
            o.stop.emplace_back(p.stop[i]);
        }
        o.add_bos = p.add_bos != 0;
        callback_bridge bridge{p.callback, p.user_data};
        if (p.callback) {
            o.on_text = &callback_bridge::call;
            o.user_data = &bridge;
        }
        ctx->impl->clear_cancel();
        const generate_result r = generate(*ctx->impl, prompt, o);
        if (result) {
            result->n_prompt_tokens = r.n_prompt_tokens;
            result->n_generated_tokens = r.n_generated_tokens;
            result->prompt_seconds = r.prompt_seconds;
            result->decode_seconds = r.decode_seconds;
            result->stop_reason = static_cast<int32_t>(r.reason);
        }
        const bool interrupted =
            r.reason == stop_reason::callback || r.reason == stop_reason::cancelled;
        return interrupted ? PI_STATUS_CANCELLED : PI_OK;
    });
}

} // extern "C"
