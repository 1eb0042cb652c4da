// pi-server's request parsing (tools/pi-server/openai_request.hpp) on arbitrary bodies, against
// the tiny sparse Llama model through the C API, as the routes call it. The first input byte picks
// the route (bits 0-1: chat completions, completions, tokenize, detokenize) and the server's
// --chat-template (bits 2-4: none, which this model lacks, or one of the names and a Jinja text
// below); the rest is the body. Chat and completion requests that parse get their sampler from
// make_sampler and draw a few tokens with it, as the scheduler would.
// The only exception that may leave the parser is request_error, with a 4xx or 5xx status and a
// message; anything else (another exception, a crash, undefined behaviour) is a finding. A request
// that parses must hold what the scheduler relies on: a non-empty prompt of in-range tokens and
// fields within their documented bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api_fixture.hpp"
#include "fuzz_models.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_scratch.hpp"
#include "openai_request.hpp"

namespace {

using namespace pi_server;

constexpr int sampled_tokens = 3;

const char* const chat_templates[] = {
    nullptr,
    "chatml",
    "llama2",
    "llama3",
    "zephyr",
    "vicuna-orca",
    "mistral-v7",
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}"};

pi_model* model() {
    static const pi::fuzz::model_ptr m = [] {
        pi_log_set([](pi_log_level, const char*, void*) {}, nullptr);
        return pi::fuzz::load_model(pi::fuzz::write_tiny_llama(pi::fuzz::scratch_dir()));
    }();
    return m.get();
}

void check_tokens(const std::vector<pi_token>& tokens) {
    for (const pi_token t : tokens)
        if (t < 0 || t >= pi_n_vocab(model())) __builtin_trap();
}

void check_generation(const openai_request& r) {
    if (r.prompt.empty()) __builtin_trap();
    check_tokens(r.prompt);
    if (r.max_tokens < -1 || r.top_logprobs < 0 || r.top_logprobs > 20 || r.stop.size() > 16)
        __builtin_trap();
    for (const std::string& s : r.stop)
        if (s.empty()) __builtin_trap();
    const sampler_ptr sampler = make_sampler(model(), r);
    const std::vector<float> logits(static_cast<size_t>(pi_n_vocab(model())), 0.0f);
    for (int i = 0; i < sampled_tokens; ++i) {
        pi_token token = -1;
        if (pi_sample(sampler.get(), logits.data(), pi_n_vocab(model()), &token) != PI_OK) break;
        check_tokens({token});
    }
}

void run(uint8_t mode, std::string_view body) {
    const json j = parse_json_body(body);
    request_context context;
    context.model = model();
    context.chat_template = chat_templates[(mode >> 2) & 7];
    context.default_max_tokens = 16;
    switch (mode & 3) {
    case 0:
        check_generation(parse_chat_request(j, context));
        break;
    case 1:
        check_generation(parse_completion_request(j, context));
        break;
    case 2: {
        const tokenize_request t = parse_tokenize_request(j);
        const uint32_t flags = (t.add_special ? PI_TOKENIZE_ADD_BOS : 0u) |
                               (t.parse_special ? PI_TOKENIZE_PARSE_SPECIAL : 0u);
        const std::vector<pi_token> tokens = tokenize_text(model(), t.content, flags);
        check_tokens(tokens);
        if (t.with_pieces)
            for (const pi_token id : tokens)
                (void)token_piece(model(), id);
        break;
    }
    default:
        (void)detokenize_tokens(model(), parse_detokenize_request(j, model()));
        break;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    try {
        run(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
        pi::fuzz::note_accepted();
    } catch (const request_error& e) {
        if (e.status < 400 || e.status > 599 || e.message.empty()) __builtin_trap();
    }
    return 0;
}
