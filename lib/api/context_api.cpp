#include <algorithm>
#include <thread>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "engine/context.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

pi_context_params context_defaults() {
    pi_context_params p{};
    p.struct_size = sizeof(p);
    p.n_ctx = 512;
    p.n_batch = 512;
    p.n_threads = static_cast<int32_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
    p.seed = PI_SEED_RANDOM;
    p.kv_f16 = 1;
    p.n_seq_max = 1;
    return p;
}

} // namespace

extern "C" {

pi_status pi_context_params_init(pi_context_params* params, size_t struct_size) {
    return api::init_params(params, struct_size, context_defaults(), "pi_context_params");
}

pi_status pi_context_create(pi_model* model, const pi_context_params* params,
                            pi_context** out_ctx) {
    return guard([&] {
        require(out_ctx, "out_ctx");
        *out_ctx = nullptr;
        require(model, "model");
        const pi_context_params p =
            api::read_params(params, pi_context_default_params(), "pi_context_params");
        context_options o;
        o.n_ctx = p.n_ctx == 0 ? model->impl->hp().n_ctx_train : p.n_ctx;
        o.n_batch = p.n_batch;
        o.n_seq_max = p.n_seq_max;
        o.n_threads = p.n_threads;
        o.kv_f16 = p.kv_f16 != 0;
        o.audit_predictor = p.audit_predictor != 0;
        o.offloaded = model->offloaded.get();
        auto handle = std::make_unique<pi_context>();
        handle->impl = std::make_unique<context>(*model->impl, o);
        *out_ctx = handle.release();
        return PI_OK;
    });
}

void pi_context_free(pi_context* ctx) {
    delete ctx;
}

int32_t pi_context_n_ctx(const pi_context* ctx) {
    return ctx ? ctx->impl->options().n_ctx : 0;
}

int32_t pi_context_n_past(const pi_context* ctx) {
    return ctx ? ctx->impl->n_past() : 0;
}

void pi_context_cancel(pi_context* ctx) {
    if (ctx) ctx->impl->cancel();
}

pi_status pi_kv_truncate(pi_context* ctx, int32_t pos) {
    return guard([&] {
        require(ctx, "ctx");
        ctx->impl->truncate(pos);
        return PI_OK;
    });
}

pi_status pi_decode(pi_context* ctx, const pi_batch* batch) {
    return guard([&] {
        require(ctx, "ctx");
        require(batch, "batch");
        require(batch->tokens, "batch->tokens");
        if (batch->n_tokens <= 0)
            fail(status::invalid_argument, "batch->n_tokens must be positive");
        const auto n = static_cast<size_t>(batch->n_tokens);
        ctx->impl->clear_cancel();
        ctx->impl->decode(batch_view{
            std::span<const int32_t>(batch->tokens, n),
            batch->pos ? std::span<const int32_t>(batch->pos, n) : std::span<const int32_t>{},
            batch->logits ? std::span<const int8_t>(batch->logits, n) : std::span<const int8_t>{}});
        return PI_OK;
    });
}

const float* pi_get_logits(pi_context* ctx, int32_t i) {
    if (!ctx) return nullptr;
    const std::span<const float> l = ctx->impl->logits(i);
    return l.empty() ? nullptr : l.data();
}

pi_status pi_context_stats_get(const pi_context* ctx, pi_context_stats* stats) {
    return guard([&] {
        require(ctx, "ctx");
        require(stats, "stats");
        const run_stats& s = ctx->impl->stats();
        pi_context_stats out{};
        out.struct_size = sizeof(out);
        out.decode_bytes = s.decode_bytes;
        out.decode_bytes_to_device = s.decode_link.to_device;
        out.decode_bytes_to_host = s.decode_link.to_host;
        out.decode_downloads = s.decode_link.downloads;
        out.bytes_to_device = s.link.to_device;
        out.bytes_to_host = s.link.to_host;
        out.cpu_wait_seconds = s.link.cpu_wait_seconds;
        out.device_wait_seconds = s.link.device_wait_seconds;
        out.decode_device_kernels = s.decode_device_kernels;
        out.decode_device_launches = s.decode_device_launches;
        out.n_prompt_tokens = s.n_prompt_tokens;
        out.n_decode_tokens = s.n_decode_tokens;
        out.prompt_seconds = s.prompt_seconds;
        out.decode_seconds = s.decode_seconds;
        out.ffn_active_fraction = s.ffn_total_neurons == 0
                                      ? 0.0
                                      : static_cast<double>(s.ffn_active_neurons) /
                                            static_cast<double>(s.ffn_total_neurons);
        api::write_output(stats, out, "pi_context_stats");
        return PI_OK;
    });
}

pi_status pi_context_layer_active_fraction(const pi_context* ctx, int32_t layer, double* fraction) {
    return guard([&] {
        require(ctx, "ctx");
        require(fraction, "fraction");
        const auto& per_layer = ctx->impl->layer_active_neurons();
        if (layer < 0 || static_cast<size_t>(layer) >= per_layer.size())
            fail(status::invalid_argument, "layer ", layer, " is outside [0, ", per_layer.size(),
                 ")");
        const run_stats& s = ctx->impl->stats();
        const uint64_t slots = (s.n_prompt_tokens + s.n_decode_tokens) *
                               static_cast<uint64_t>(ctx->impl->get_model().hp().n_ff);
        *fraction = slots == 0 ? 0.0
                               : static_cast<double>(per_layer[static_cast<size_t>(layer)]) /
                                     static_cast<double>(slots);
        return PI_OK;
    });
}

pi_status pi_predictor_audit_get(const pi_context* ctx, int32_t layer, pi_predictor_audit* audit) {
    return guard([&] {
        require(ctx, "ctx");
        require(audit, "audit");
        const auto& audits = ctx->impl->audits();
        if (audits.empty())
            fail(status::unsupported,
                 "predictor auditing is off: create the context with audit_predictor = 1 "
                 "on a model that runs sparse");
        if (layer < 0 || static_cast<size_t>(layer) >= audits.size())
            fail(status::invalid_argument, "layer ", layer, " is outside [0, ", audits.size(), ")");
        const predictor_audit& a = audits[static_cast<size_t>(layer)];
        pi_predictor_audit out{};
        out.struct_size = sizeof(out);
        out.tokens = a.tokens;
        out.true_active = a.true_active;
        out.predicted_active = a.predicted_active;
        out.true_positive = a.true_positive;
        out.recall = a.true_active
                         ? static_cast<double>(a.true_positive) / static_cast<double>(a.true_active)
                         : 1.0;
        out.precision = a.predicted_active ? static_cast<double>(a.true_positive) /
                                                 static_cast<double>(a.predicted_active)
                                           : 1.0;
        api::write_output(audit, out, "pi_predictor_audit");
        return PI_OK;
    });
}

pi_status pi_context_set_ffn_observer(pi_context* ctx, pi_ffn_observer observer, void* user_data) {
    return guard([&] {
        require(ctx, "ctx");
        if (!observer) {
            ctx->impl->set_ffn_observer({});
            return PI_OK;
        }
        const hparams& h = ctx->impl->get_model().hp();
        ctx->impl->set_ffn_observer(
            [observer, user_data, n_embd = h.n_embd, n_ff = h.n_ff](const ffn_observation& o) {
                return observer(o.layer, o.n_tokens, o.input.data(), n_embd, o.activation.data(),
                                n_ff, user_data) != 0;
            });
        return PI_OK;
    });
}

void pi_context_stats_reset(pi_context* ctx) {
    if (ctx) ctx->impl->reset_stats();
}

} // extern "C"
