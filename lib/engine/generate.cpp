#include "engine/generate.hpp"

#include <algorithm>
#include <chrono>

#include "engine/context.hpp"
#include "engine/text_stream.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {

namespace {

// Hands released text to the text callback; false when the callback asks to stop.
bool send_text(const generate_options& o, std::string_view text) {
    return text.empty() || !o.on_text || o.on_text(text.data(), text.size(), o.user_data);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) noexcept {
    const size_t n = std::min(a.size(), b.size());
    size_t k = 0;
    while (k < n && a[k] == b[k])
        ++k;
    return k;
}

// Keeps the first n_keep positions of seq and drops half of the rest, moving the remainder
// down; returns false when nothing can be dropped.
bool shift_context(context& ctx, int32_t seq, int32_t n_keep) {
    const int32_t n_past = ctx.cache().pos_max(seq) + 1;
    const int32_t keep = std::clamp(n_keep, 0, n_past);
    const int32_t discard = (n_past - keep) / 2;
    if (discard <= 0) return false;
    ctx.cache().remove(seq, keep, keep + discard);
    ctx.cache().shift(seq, keep + discard, n_past, -discard);
    return true;
}

// Decodes tokens after the cached ones of the options' sequence, in n_batch chunks; a full cache
// shifts the context when the options allow it.
void decode_tokens(context& ctx, const generate_options& o, std::span<const int32_t> tokens,
                   generate_result& result) {
    const auto n_batch = static_cast<size_t>(ctx.options().n_batch);
    for (size_t at = 0; at < tokens.size();) {
        const size_t n = std::min(n_batch, tokens.size() - at);
        try {
            batch_view b;
            b.tokens = tokens.subspan(at, n);
            b.seq = o.seq;
            ctx.decode(b);
        } catch (const error& e) {
            if (e.code() != status::context_full || !o.context_shift ||
                !shift_context(ctx, o.seq, o.n_keep))
                throw;
            ++result.n_context_shifts;
            continue;
        }
        at += n;
    }
}

} // namespace

generate_result generate(context& ctx, sampler& smp, std::string_view prompt,
                         const generate_options& options) {
    if (options.max_tokens < 0) fail(status::invalid_argument, "max_tokens must not be negative");
    if (options.n_probs < 0 || options.n_probs > 64)
        fail(status::invalid_argument, "n_probs must be in [0, 64] (got ", options.n_probs, ")");
    if (options.n_keep < 0)
        fail(status::invalid_argument, "n_keep must not be negative (got ", options.n_keep, ")");
    const model& m = ctx.get_model();
    const tokenizer& tok = m.vocab();
    const int32_t seq = options.seq;
    const std::vector<int32_t> cached = ctx.cache().leading_tokens(seq); // checks seq
    const std::vector<int32_t> tokens = tok.encode(prompt, options.add_bos, options.parse_special);
    if (tokens.empty()) fail(status::invalid_argument, "the prompt is empty (and no BOS is added)");
    const int32_t n_ctx = ctx.options().n_ctx;
    if (tokens.size() > static_cast<size_t>(n_ctx))
        fail(status::context_full, "the prompt has ", tokens.size(),
             " tokens, more than n_ctx = ", n_ctx);

    generate_result result;
    result.n_prompt_tokens = static_cast<int32_t>(tokens.size());
    // The last prompt token is decoded again when all are cached: its logits start the reply.
    const size_t reused =
        options.reuse_cache ? std::min(common_prefix(cached, tokens), tokens.size() - 1) : 0;
    result.n_cached_tokens = static_cast<int32_t>(reused);
    ctx.cache().remove(seq, static_cast<int32_t>(reused), -1);
    for (size_t i = options.fresh_sampler ? 0 : reused; i < tokens.size(); ++i)
        smp.accept(tokens[i]);
    text_stream stream(options.stop);
    const bool want_logprobs = options.on_token != nullptr;
    token_logprobs logprobs;
    try {
        const auto prompt_start = std::chrono::steady_clock::now();
        decode_tokens(ctx, options,
                      std::span<const int32_t>(tokens).subspan(reused), result);
        result.prompt_seconds = seconds_since(prompt_start);

        const auto decode_start = std::chrono::steady_clock::now();
        while (result.reason == stop_reason::none) {
            if (result.n_generated_tokens >= options.max_tokens) {
                result.reason = stop_reason::max_tokens;
                break;
            }
            const std::span<const float> logits = ctx.logits(-1);
            const int32_t next = smp.sample(logits);
            if (tok.is_eog(next)) {
                result.reason = stop_reason::eos;
                break;
            }
            ++result.n_generated_tokens;
            if (want_logprobs) logprobs = top_logprobs(logits, next, options.n_probs);
            const bool stop_matched = stream.push(tok.piece(next));
            if (stop_matched) result.reason = stop_reason::stop_string;
            // At a stop string the text before it is sent whatever the callback answers.
            const bool go_on = send_text(options, stream.released()) && !stop_matched;
            if (!go_on && !stop_matched) result.reason = stop_reason::callback;
            if (options.on_token &&
                !options.on_token(token_event{next, stream.released(), &logprobs},
                                  options.user_data) &&
                go_on)
                result.reason = stop_reason::callback;
            if (result.reason != stop_reason::none) break;
            if (result.n_generated_tokens >= options.max_tokens) {
                result.reason = stop_reason::max_tokens;
                break;
            }
            if (ctx.cache().pos_max(seq) + 1 >= n_ctx) {
                if (!options.context_shift || !shift_context(ctx, seq, options.n_keep)) {
                    result.reason = stop_reason::context_full;
                    break;
                }
                ++result.n_context_shifts;
            }
            const int32_t one[1] = {next};
            try {
                decode_tokens(ctx, options, std::span<const int32_t>(one, 1), result);
            } catch (const error& e) {
                if (e.code() != status::context_full) throw;
                result.reason = stop_reason::context_full;
            }
        }
        result.decode_seconds = seconds_since(decode_start);
    } catch (const error& e) {
        if (e.code() != status::cancelled) throw;
        result.reason = stop_reason::cancelled;
    }
    if (result.reason != stop_reason::stop_string && result.reason != stop_reason::callback) {
        stream.flush();
        send_text(options, stream.released());
    }
    return result;
}

} // namespace pi
