// Sequences: multi-sequence batches and the per-sequence edits of the KV cache.
#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "engine/context.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

// A query that reports failure as -1 instead of a status.
template <typename F> int32_t or_minus_one(const pi_context* ctx, F&& query) noexcept {
    if (!ctx) return -1;
    try {
        return query(*ctx->impl);
    } catch (...) {
        return -1;
    }
}

} // namespace

extern "C" {

pi_status pi_context_decode(pi_context* ctx, const pi_seq_batch* batch) {
    return guard([&] {
        require(ctx, "ctx");
        require(batch, "batch");
        if (batch->struct_size < sizeof(pi_seq_batch))
            fail(status::invalid_argument, "batch->struct_size is ", batch->struct_size,
                 "; set it to sizeof(pi_seq_batch)");
        require(batch->tokens, "batch->tokens");
        if (batch->n_tokens <= 0)
            fail(status::invalid_argument, "batch->n_tokens must be positive (got ",
                 batch->n_tokens, ")");
        const auto n = static_cast<size_t>(batch->n_tokens);
        batch_view view;
        view.tokens = std::span<const int32_t>(batch->tokens, n);
        if (batch->pos) view.pos = std::span<const int32_t>(batch->pos, n);
        if (batch->logits) view.logits = std::span<const int8_t>(batch->logits, n);
        if (batch->seq_id) view.seqs = std::span<const int32_t>(batch->seq_id, n);
        view.last_of_each_sequence = true;
        ctx->impl->clear_cancel();
        ctx->impl->decode(view);
        return PI_OK;
    });
}

int32_t pi_context_n_seq_max(const pi_context* ctx) {
    return ctx ? ctx->impl->options().n_seq_max : 0;
}

pi_status pi_kv_seq_remove(pi_context* ctx, pi_seq_id seq, int32_t p0, int32_t p1) {
    return guard([&] {
        require(ctx, "ctx");
        ctx->impl->cache().remove(seq, p0, p1);
        return PI_OK;
    });
}

pi_status pi_kv_seq_copy(pi_context* ctx, pi_seq_id src, pi_seq_id dst, int32_t p0, int32_t p1) {
    return guard([&] {
        require(ctx, "ctx");
        ctx->impl->cache().copy(src, dst, p0, p1);
        return PI_OK;
    });
}

pi_status pi_kv_seq_keep(pi_context* ctx, pi_seq_id seq) {
    return guard([&] {
        require(ctx, "ctx");
        ctx->impl->cache().keep(seq);
        return PI_OK;
    });
}

pi_status pi_kv_seq_shift(pi_context* ctx, pi_seq_id seq, int32_t p0, int32_t p1, int32_t delta) {
    return guard([&] {
        require(ctx, "ctx");
        ctx->impl->cache().shift(seq, p0, p1, delta);
        return PI_OK;
    });
}

int32_t pi_kv_seq_pos_min(const pi_context* ctx, pi_seq_id seq) {
    return or_minus_one(ctx, [&](const context& c) { return c.cache().pos_min(seq); });
}

int32_t pi_kv_seq_pos_max(const pi_context* ctx, pi_seq_id seq) {
    return or_minus_one(ctx, [&](const context& c) { return c.cache().pos_max(seq); });
}

int32_t pi_kv_n_used_cells(const pi_context* ctx) {
    return or_minus_one(ctx, [&](const context& c) { return c.cache().used_cells(); });
}

} // extern "C"
