#pragma once
// The request bodies of the OpenAI routes (and llama.cpp's extras), checked field by field and
// turned into what the scheduler runs: the prompt's tokens, the stop strings and the sampler's
// parameters. Every bad field is a request_error naming the field by its JSON path.
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "generation.hpp"
#include "powerinfer.h"

namespace pi_server {

using json = nlohmann::ordered_json;

// An answer other than 200, as the body {"error": {...}} carries it. Thrown inside a route's
// handler and caught there (never across threads).
struct request_error : std::exception {
    int status = 400;
    std::string type = "invalid_request_error";
    std::string message;
    std::string param; // JSON path of the field at fault; empty: null
    std::string code;  // empty: null

    request_error(int status_, std::string type_, std::string message_, std::string param_ = {},
                  std::string code_ = {});
    const char* what() const noexcept override { return message.c_str(); }
};

// 400 invalid_request_error for the field at `param`.
request_error bad_field(std::string param, std::string message);
// The error type OpenAI names for an HTTP status ("invalid_request_error", "not_found_error", ...).
const char* error_type_for_status(int status) noexcept;

enum class request_kind { chat, completion };

struct openai_request {
    request_kind kind = request_kind::chat;
    std::vector<pi_token> prompt; // never empty
    bool echo = false;            // completions: the reply's text starts with echo_text
    std::string echo_text;
    bool stream = false;
    bool include_usage = false; // stream_options.include_usage
    int32_t max_tokens = -1;    // -1: until the slot's context is full
    std::vector<std::string> stop;
    bool ignore_eos = false;
    bool logprobs = false;
    int32_t top_logprobs = 0;

    // The sampler: every scalar field of the chain; the pointer fields are filled from the
    // members below by sampler_params().
    pi_sampler_params sampling = pi_sampler_default_params();
    std::vector<pi_logit_bias> logit_bias;
    std::vector<int32_t> stages;                    // empty: the default order
    std::vector<std::string> dry_sequence_breakers; // empty: the library's
    std::string grammar;                            // GBNF; empty: none
    std::string json_schema;                        // empty: none
    std::string constraint_param; // the field a grammar that does not compile is blamed on

    // `sampling` with its pointers aimed at this request's members; breakers keeps the
    // C strings of the DRY breakers alive as long as the result is used.
    pi_sampler_params sampler_params(std::vector<const char*>& breakers) const;
};

// What the parser needs from the server.
struct request_context {
    const pi_model* model = nullptr;
    const char* chat_template = nullptr; // NULL: the model's
    int32_t default_max_tokens = -1;     // for requests that name none
};

// The body as JSON: 400 naming the line and column when it is not, or when it is not an object.
json parse_json_body(std::string_view body);

// POST /v1/chat/completions and POST /v1/completions.
openai_request parse_chat_request(const json& body, const request_context& context);
openai_request parse_completion_request(const json& body, const request_context& context);

// The request's sampler for the model: 400 naming constraint_param when its grammar or JSON
// schema does not compile, 400 with the library's message for any other value it refuses.
sampler_ptr make_sampler(const pi_model* model, const openai_request& request);

// POST /tokenize and POST /detokenize.
struct tokenize_request {
    std::string content;
    bool add_special = false;
    bool parse_special = false;
    bool with_pieces = false;
};
tokenize_request parse_tokenize_request(const json& body);
std::vector<pi_token> parse_detokenize_request(const json& body, const pi_model* model);

// The tokenizer's calls, with a request_error (500) when the library fails.
std::vector<pi_token> tokenize_text(const pi_model* model, std::string_view text, uint32_t flags);
std::string token_piece(const pi_model* model, pi_token token);
std::string detokenize_tokens(const pi_model* model, const std::vector<pi_token>& tokens);

} // namespace pi_server
