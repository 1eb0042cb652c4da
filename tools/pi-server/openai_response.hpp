#pragma once
// The response bodies of the OpenAI routes: whole replies, stream chunks, logprobs, usage,
// llama.cpp's timings and the error object.
#include <cstdint>
#include <string>
#include <vector>

#include "generation.hpp"
#include "openai_request.hpp"
#include "powerinfer.h"

namespace pi_server {

// What every reply and chunk of one request shares.
struct reply_meta {
    std::string id;    // "chatcmpl-N" or "cmpl-N"
    std::string model; // the alias
    int64_t created = 0;
};

// JSON text for the wire: bytes that are not UTF-8 (a token that is half a character) become
// U+FFFD instead of failing.
std::string json_text(const json& value);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const json& value);
inline constexpr const char* sse_done = "data: [DONE]\n\n";

// {"error": {"message", "type", "param", "code"}}.
json error_json(const request_error& error);

json usage_json(const generation_usage& usage);
// llama.cpp's timings, with the FFN active fraction of the server's decoding so far.
json timings_json(const generation_usage& usage, double ffn_active_fraction);

// The logprobs of chat replies: {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
// Outputs with token -1 (text released at the end) carry no logprob and are skipped.
json chat_logprobs(const pi_model* model, const std::vector<token_output>& tokens);
// The logprobs of completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
// text_offset counts from first_offset (the echoed prompt's length, else 0).
json completion_logprobs(const pi_model* model, const std::vector<token_output>& tokens,
                         size_t first_offset);

// finish: stop or length. logprobs: null or what chat_logprobs / completion_logprobs made.
json chat_response(const reply_meta& meta, const std::string& text, json logprobs,
                   finish_reason finish, const generation_usage& usage, double ffn_active_fraction);
json completion_response(const reply_meta& meta, const std::string& text, json logprobs,
                         finish_reason finish, const generation_usage& usage,
                         double ffn_active_fraction);

// Stream chunks. finish none: "finish_reason": null.
json chat_chunk(const reply_meta& meta, json delta, json logprobs, finish_reason finish);
json completion_chunk(const reply_meta& meta, const std::string& text, json logprobs,
                      finish_reason finish);
// The chunk after the last one when stream_options.include_usage: "choices": [] and "usage".
json usage_chunk(const reply_meta& meta, request_kind kind, const generation_usage& usage);

} // namespace pi_server
