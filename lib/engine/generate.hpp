#pragma once
// The one-call generation path: prompt in, complete UTF-8 text streamed out.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

struct generate_options {
    int32_t max_tokens = 128;
    sampler_options sampling;
    std::vector<std::string> stop;
    bool add_bos = true;
    // Receives complete UTF-8 text; returns false to stop.
    bool (*on_text)(const char* text, size_t len, void* user_data) = nullptr;
    void* user_data = nullptr;
};

struct generate_result {
    int32_t n_prompt_tokens = 0;
    int32_t n_generated_tokens = 0;
    double prompt_seconds = 0.0;
    double decode_seconds = 0.0;
    stop_reason reason = stop_reason::none;
};

// Clears the context's cache, then generates. Throws pi::error for bad input (an empty prompt,
// a prompt longer than n_ctx); cancellation is reported through result.reason, not thrown.
generate_result generate(context& ctx, std::string_view prompt, const generate_options& options);

// Length of the longest prefix of `text` that ends on a complete UTF-8 character.
size_t complete_utf8_prefix(std::string_view text) noexcept;

} // namespace pi
