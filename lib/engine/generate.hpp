#pragma once
// The one-call generation path: prompt in, complete UTF-8 text streamed out. The cache keeps the
// tokens of every call, so the next call with a longer transcript decodes only what is new
// (docs/generation.md).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text_stream.hpp" // what on_text receives; complete_utf8_prefix
#include "sampling/logprobs.hpp"
#include "sampling/sampler.hpp"

namespace pi {

class context;

enum class stop_reason : int32_t {
    none = 0,
    eos = 1,
    max_tokens = 2,
    stop_string = 3,
    callback = 4,
    cancelled = 5,
    context_full = 6
};

// One generated token and the text it releases (valid only during the call).
struct token_event {
    int32_t token = 0;
    std::string_view text;
    const token_logprobs* logprobs = nullptr; // with n_probs > 0 or a listener; else null
};

struct generate_options {
    int32_t max_tokens = 128;
    std::vector<std::string> stop;
    bool add_bos = true;
    bool parse_special = false;
    bool reuse_cache = true;     // keep the cached tokens the prompt starts with
    bool context_shift = false;  // when full: keep n_keep tokens, drop half of the rest
    int32_t n_keep = 1;
    int32_t seq = 0;
    int32_t n_probs = 0;         // alternatives in each token event's logprobs
    // The sampler has seen none of the cached tokens: its history gets the whole prompt, else
    // only the tokens decoded now.
    bool fresh_sampler = true;
    // Receives complete UTF-8 text; returns false to stop.
    bool (*on_text)(const char* text, size_t len, void* user_data) = nullptr;
    // Receives each generated token; returns false to stop.
    bool (*on_token)(const token_event& event, void* user_data) = nullptr;
    void* user_data = nullptr;
};

struct generate_result {
    int32_t n_prompt_tokens = 0;
    int32_t n_cached_tokens = 0;
    int32_t n_generated_tokens = 0;
    int32_t n_context_shifts = 0;
    double prompt_seconds = 0.0;
    double decode_seconds = 0.0;
    stop_reason reason = stop_reason::none;
};

// Generates in sequence options.seq with `smp` (which advances). Throws pi::error for bad input
// (an empty prompt, a prompt longer than n_ctx, a bad sequence id); cancellation is reported
// through result.reason, not thrown.
generate_result generate(context& ctx, sampler& smp, std::string_view prompt,
                         const generate_options& options);

} // namespace pi
