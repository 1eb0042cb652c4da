#pragma once

#include <string>
#include <vector>

#include "options.hpp"
#include "powerinfer.h"
#include "summary.hpp"

namespace pi::bench {

// --chat-turns: one turn of a chat whose every turn sends the whole transcript through pi_generate
// with reuse_cache = 1 (bench/README.md).
struct chat_turn_result {
    int turn = 0;             // 1-based
    int prompt_tokens = 0;    // the whole transcript
    int cached_tokens = 0;    // of those, already in the cache
    int generated_tokens = 0; // of the reply
    summary prompt_ms;        // decoding the new tokens
    summary decode_tokens_per_second;
    double decode_bytes_per_token = 0; // weights and KV cache read per reply token
    // pi_decode alone, one token at a time, from a cache as deep as this turn's prompt: what the
    // reply's decoding costs without the chat
    summary depth_tokens_per_second;
    int new_tokens() const { return prompt_tokens - cached_tokens; }
};

// `message` explains a failure (with pi_last_error()).
bool measure_chat(pi_model* model, const options& o, std::vector<chat_turn_result>& out,
                  std::string& message);

} // namespace pi::bench
