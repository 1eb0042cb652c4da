#include "openai_response.hpp"

#include <utility>

namespace pi_server {
namespace {

json nullable(const std::string& text) {
    return text.empty() ? json(nullptr) : json(text);
}

json bytes_of(const std::string& piece) {
    json bytes = json::array();
    for (const char c : piece)
        bytes.push_back(static_cast<unsigned char>(c));
    return bytes;
}

json finish_json(finish_reason finish) {
    return finish == finish_reason::none ? json(nullptr) : json(finish_reason_name(finish));
}

const char* object_name(request_kind kind, bool chunk) {
    if (kind == request_kind::chat) return chunk ? "chat.completion.chunk" : "chat.completion";
    return "text_completion";
}

json envelope(const reply_meta& meta, const char* object) {
    return json{
        {"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

} // namespace

std::string json_text(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& value) {
    return "data: " + json_text(value) + "\n\n";
}

json error_json(const request_error& error) {
    return json{{"error",
                 {{"message", error.message},
                  {"type", error.type},
                  {"param", nullable(error.param)},
                  {"code", nullable(error.code)}}}};
}

json usage_json(const generation_usage& usage) {
    return json{{"prompt_tokens", usage.prompt_tokens},
                {"completion_tokens", usage.completion_tokens},
                {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

json timings_json(const generation_usage& usage, double ffn_active_fraction) {
    const double predicted_ms = usage.decode_seconds * 1000.0;
    return json{{"prompt_n", usage.prompt_tokens - usage.cached_tokens},
                {"prompt_ms", usage.prompt_seconds * 1000.0},
                {"predicted_n", usage.completion_tokens},
                {"predicted_ms", predicted_ms},
                {"predicted_per_second",
                 usage.decode_seconds > 0.0 ? usage.completion_tokens / usage.decode_seconds : 0.0},
                {"cached_n", usage.cached_tokens},
                {"ffn_active_fraction", ffn_active_fraction}};
}

json chat_logprobs(const pi_model* model, const std::vector<token_output>& tokens) {
    json content = json::array();
    for (const token_output& t : tokens) {
        if (t.token < 0) continue;
        const std::string piece = token_piece(model, t.token);
        json top = json::array();
        for (const auto& [id, logprob] : t.top) {
            const std::string alternative = token_piece(model, id);
            top.push_back(
                {{"token", alternative}, {"logprob", logprob}, {"bytes", bytes_of(alternative)}});
        }
        content.push_back({{"token", piece},
                           {"logprob", t.logprob},
                           {"bytes", bytes_of(piece)},
                           {"top_logprobs", std::move(top)}});
    }
    return json{{"content", std::move(content)}};
}

json completion_logprobs(const pi_model* model, const std::vector<token_output>& tokens,
                         size_t first_offset) {
    json pieces = json::array(), logprobs = json::array(), tops = json::array(),
         offsets = json::array();
    size_t offset = first_offset;
    for (const token_output& t : tokens) {
        if (t.token < 0) continue;
        const std::string piece = token_piece(model, t.token);
        json top = json::object();
        for (const auto& [id, logprob] : t.top)
            top[token_piece(model, id)] = logprob;
        pieces.push_back(piece);
        logprobs.push_back(t.logprob);
        tops.push_back(std::move(top));
        offsets.push_back(offset);
        offset += piece.size();
    }
    return json{{"tokens", std::move(pieces)},
                {"token_logprobs", std::move(logprobs)},
                {"top_logprobs", std::move(tops)},
                {"text_offset", std::move(offsets)}};
}

json chat_response(const reply_meta& meta, const std::string& text, json logprobs,
                   finish_reason finish, const generation_usage& usage,
                   double ffn_active_fraction) {
    json reply = envelope(meta, object_name(request_kind::chat, false));
    reply["choices"] = json::array({{{"index", 0},
                                     {"message", {{"role", "assistant"}, {"content", text}}},
                                     {"logprobs", std::move(logprobs)},
                                     {"finish_reason", finish_json(finish)}}});
    reply["usage"] = usage_json(usage);
    reply["timings"] = timings_json(usage, ffn_active_fraction);
    return reply;
}

json completion_response(const reply_meta& meta, const std::string& text, json logprobs,
                         finish_reason finish, const generation_usage& usage,
                         double ffn_active_fraction) {
    json reply = envelope(meta, object_name(request_kind::completion, false));
    reply["choices"] = json::array({{{"text", text},
                                     {"index", 0},
                                     {"logprobs", std::move(logprobs)},
                                     {"finish_reason", finish_json(finish)}}});
    reply["usage"] = usage_json(usage);
    reply["timings"] = timings_json(usage, ffn_active_fraction);
    return reply;
}

json chat_chunk(const reply_meta& meta, json delta, json logprobs, finish_reason finish) {
    json chunk = envelope(meta, object_name(request_kind::chat, true));
    chunk["choices"] = json::array({{{"index", 0},
                                     {"delta", std::move(delta)},
                                     {"logprobs", std::move(logprobs)},
                                     {"finish_reason", finish_json(finish)}}});
    return chunk;
}

json completion_chunk(const reply_meta& meta, const std::string& text, json logprobs,
                      finish_reason finish) {
    json chunk = envelope(meta, object_name(request_kind::completion, true));
    chunk["choices"] = json::array({{{"text", text},
                                     {"index", 0},
                                     {"logprobs", std::move(logprobs)},
                                     {"finish_reason", finish_json(finish)}}});
    return chunk;
}

json usage_chunk(const reply_meta& meta, request_kind kind, const generation_usage& usage) {
    json chunk = envelope(meta, object_name(kind, true));
    chunk["choices"] = json::array();
    chunk["usage"] = usage_json(usage);
    return chunk;
}

} // namespace pi_server
