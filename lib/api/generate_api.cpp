#include <cstddef>
#include <memory>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "api/sampler_options.hpp"
#include "engine/generate.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

// The caller's callbacks behind the engine's.
struct callback_bridge {
    pi_token_callback on_text;
    pi_token_event_callback on_token;
    void* user_data;
    std::vector<pi_token> top_tokens;
    std::vector<float> top_logprobs;

    static bool text(const char* text, size_t len, void* self) {
        auto* b = static_cast<callback_bridge*>(self);
        return b->on_text(text, len, b->user_data) != 0;
    }
    static bool token(const token_event& e, void* self) {
        auto* b = static_cast<callback_bridge*>(self);
        b->top_tokens.clear();
        b->top_logprobs.clear();
        for (const token_logprob& t : e.logprobs->top) {
            b->top_tokens.push_back(t.token);
            b->top_logprobs.push_back(t.logprob);
        }
        pi_token_event event{};
        event.struct_size = sizeof(event);
        event.token = e.token;
        event.logprob = e.logprobs->chosen.logprob;
        event.text = e.text.data();
        event.len = e.text.size();
        event.n_top = static_cast<int32_t>(b->top_tokens.size());
        event.top_tokens = b->top_tokens.data();
        event.top_logprobs = b->top_logprobs.data();
        return b->on_token(&event, b->user_data) != 0;
    }
};

// The sampler a call uses: the caller's, or one made for this call from the params.
sampler& sampler_for(const pi_generate_params& p, const pi_context& ctx,
                     std::unique_ptr<sampler>& owned) {
    if (p.sampler) return *p.sampler->impl;
    pi_sampler_params chain = pi_sampler_default_params();
    if (p.sampler_params) {
        chain = api::read_params(p.sampler_params, pi_sampler_default_params(), "pi_sampler_params");
    } else {
        chain.temperature = p.temperature;
        chain.top_k = p.top_k;
        chain.top_p = p.top_p;
        chain.seed = p.seed;
    }
    owned = api::make_sampler(chain, &ctx.impl->get_model().vocab());
    return *owned;
}

pi_generate_params generate_defaults() {
    pi_generate_params p{};
    p.struct_size = sizeof(p);
    p.max_tokens = 128;
    const pi_sampler_params basic = pi_sampler_default_params();
    p.sampling_struct_size = offsetof(pi_sampler_params, min_p); // 0.1's embedded struct
    p.temperature = basic.temperature;
    p.top_k = basic.top_k;
    p.top_p = basic.top_p;
    p.seed = basic.seed;
    p.add_bos = 1;
    p.reuse_cache = 1;
    p.n_keep = 1;
    return p;
}

} // namespace

extern "C" {

pi_status pi_generate_params_init(pi_generate_params* params, size_t struct_size) {
    return api::init_params(params, struct_size, generate_defaults(), "pi_generate_params");
}

pi_status pi_generate(pi_context* ctx, const char* prompt, const pi_generate_params* params,
                      pi_generate_result* result) {
    return guard([&] {
        require(ctx, "ctx");
        require(prompt, "prompt");
        if (result) api::checked_struct_size(result->struct_size, "pi_generate_result");
        const pi_generate_params p =
            api::read_params(params, pi_generate_default_params(), "pi_generate_params");
        if (p.n_stop > 0 && !p.stop)
            fail(status::invalid_argument, "pi_generate_params.stop is NULL but n_stop > 0");
        generate_options o;
        o.max_tokens = p.max_tokens;
        for (size_t i = 0; i < p.n_stop; ++i) {
            if (!p.stop[i]) fail(status::invalid_argument, "stop string ", i, " is NULL");
            o.stop.emplace_back(p.stop[i]);
        }
        o.add_bos = p.add_bos != 0;
        o.parse_special = p.parse_special != 0;
        o.reuse_cache = p.reuse_cache != 0;
        o.context_shift = p.context_shift != 0;
        o.n_keep = p.n_keep;
        o.seq = p.seq_id;
        o.n_probs = p.n_probs;
        o.fresh_sampler = p.sampler == nullptr;
        callback_bridge bridge{p.callback, p.on_token, p.user_data, {}, {}};
        if (p.callback) o.on_text = &callback_bridge::text;
        if (p.on_token) o.on_token = &callback_bridge::token;
        o.user_data = &bridge;
        std::unique_ptr<sampler> owned;
        sampler& smp = sampler_for(p, *ctx, owned);
        ctx->impl->clear_cancel();
        const generate_result r = generate(*ctx->impl, smp, prompt, o);
        if (result) {
            pi_generate_result out{};
            out.struct_size = sizeof(out);
            out.n_prompt_tokens = r.n_prompt_tokens;
            out.n_generated_tokens = r.n_generated_tokens;
            out.prompt_seconds = r.prompt_seconds;
            out.decode_seconds = r.decode_seconds;
            out.stop_reason = static_cast<int32_t>(r.reason);
            out.n_cached_tokens = r.n_cached_tokens;
            out.n_context_shifts = r.n_context_shifts;
            api::write_output(result, out, "pi_generate_result");
        }
        const bool interrupted =
            r.reason == stop_reason::callback || r.reason == stop_reason::cancelled;
        return interrupted ? PI_STATUS_CANCELLED : PI_OK;
    });
}

} // extern "C"
