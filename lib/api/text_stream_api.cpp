// pi_text_stream and pi_logits_logprobs: what pi_generate does with each sampled token, for
// callers that run their own decoding loop.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "engine/text_stream.hpp"
#include "sampling/logprobs.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

// The model's tokenizer is borrowed: the model outlives its streams, as it does its contexts.
struct pi_text_stream {
    const tokenizer* vocab;
    text_stream impl;
};

namespace {

// The most alternatives pi_logits_logprobs reports, as pi_generate_params.n_probs allows.
constexpr int32_t max_top_logprobs = 64;

} // namespace

extern "C" {

pi_status pi_text_stream_create(const pi_model* model, const char* const* stop, size_t n_stop,
                                pi_text_stream** out) {
    return guard([&] {
        require(out, "out");
        *out = nullptr;
        require(model, "model");
        if (n_stop > 0 && !stop)
            fail(status::invalid_argument, "argument 'stop' is NULL but n_stop is ", n_stop);
        std::vector<std::string> strings;
        strings.reserve(n_stop);
        for (size_t i = 0; i < n_stop; ++i) {
            if (!stop[i]) fail(status::invalid_argument, "stop string ", i, " is NULL");
            strings.emplace_back(stop[i]);
        }
        *out = new pi_text_stream{&model->impl->vocab(), text_stream(std::move(strings))};
        return PI_OK;
    });
}

void pi_text_stream_free(pi_text_stream* stream) {
    delete stream;
}

pi_status pi_text_stream_push(pi_text_stream* stream, pi_token token, const char** text,
                              size_t* len, int32_t* stopped) {
    return guard([&] {
        require(stream, "stream");
        require(text, "text");
        require(len, "len");
        *text = "";
        *len = 0;
        if (stopped) *stopped = 0;
        const int32_t n_vocab = stream->vocab->n_tokens();
        if (token < 0 || token >= n_vocab)
            fail(status::invalid_argument, "token ", token, " is outside the vocabulary of ",
                 n_vocab, " tokens");
        const bool matched = stream->impl.push(stream->vocab->piece(token));
        *text = stream->impl.released().data();
        *len = stream->impl.released().size();
        if (stopped) *stopped = matched ? 1 : 0;
        return PI_OK;
    });
}

pi_status pi_text_stream_flush(pi_text_stream* stream, const char** text, size_t* len) {
    return guard([&] {
        require(stream, "stream");
        require(text, "text");
        require(len, "len");
        stream->impl.flush();
        *text = stream->impl.released().data();
        *len = stream->impl.released().size();
        return PI_OK;
    });
}

pi_status pi_logits_logprobs(const float* logits, int32_t n_vocab, pi_token token, int32_t n_top,
                             float* logprob, pi_token* top_tokens, float* top_logprobs) {
    return guard([&] {
        require(logits, "logits");
        require(logprob, "logprob");
        if (n_vocab <= 0)
            fail(status::invalid_argument, "n_vocab must be positive (got ", n_vocab, ")");
        if (n_top < 0 || n_top > max_top_logprobs || n_top > n_vocab)
            fail(status::invalid_argument, "n_top must be in [0, ", max_top_logprobs,
                 "] and at most n_vocab = ", n_vocab, " (got ", n_top, ")");
        if (n_top > 0) {
            require(top_tokens, "top_tokens");
            require(top_logprobs, "top_logprobs");
        }
        const token_logprobs lp = pi::top_logprobs(
            std::span<const float>(logits, static_cast<size_t>(n_vocab)), token, n_top);
        *logprob = lp.chosen.logprob;
        for (size_t i = 0; i < lp.top.size(); ++i) {
            top_tokens[i] = lp.top[i].token;
            top_logprobs[i] = lp.top[i].logprob;
        }
        return PI_OK;
    });
}

} // extern "C"
