// pi_text_stream and pi_logits_logprobs: the text and log-probabilities of pi_generate for a
// caller's own decoding loop, each with its bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "api_test_data.hpp"
#include "powerinfer.h"

namespace {

const std::string& stream_model() {
    static const std::string path = [] {
        const std::string out = std::string(PI_TEST_BINARY_DIR) + "/text_stream.gguf";
        write_tiny_model(out, 3);
        return out;
    }();
    return path;
}

struct model_handle {
    pi_model* model = nullptr;
    model_handle() { REQUIRE(pi_model_load(stream_model().c_str(), nullptr, &model) == PI_OK); }
    ~model_handle() { pi_model_free(model); }
    model_handle(const model_handle&) = delete;
    model_handle& operator=(const model_handle&) = delete;
};

struct stream_handle {
    pi_text_stream* stream = nullptr;
    stream_handle(const pi_model* model, const std::vector<const char*>& stop) {
        REQUIRE(pi_text_stream_create(model, stop.data(), stop.size(), &stream) == PI_OK);
    }
    ~stream_handle() { pi_text_stream_free(stream); }
    stream_handle(const stream_handle&) = delete;
    stream_handle& operator=(const stream_handle&) = delete;
};

// What one push released, and whether it stopped.
struct pushed {
    std::string text;
    bool stopped = false;
};

pushed push(pi_text_stream* stream, pi_token token) {
    const char* text = nullptr;
    size_t len = 0;
    int32_t stopped = -1;
    REQUIRE(pi_text_stream_push(stream, token, &text, &len, &stopped) == PI_OK);
    REQUIRE(text != nullptr);
    REQUIRE((stopped == 0 || stopped == 1));
    return {std::string(text, len), stopped == 1};
}

std::string flush(pi_text_stream* stream) {
    const char* text = nullptr;
    size_t len = 0;
    REQUIRE(pi_text_stream_flush(stream, &text, &len) == PI_OK);
    REQUIRE(text != nullptr);
    return std::string(text, len);
}

std::string piece(const pi_model* model, pi_token token) {
    char buf[64];
    size_t len = 0;
    REQUIRE(pi_token_to_piece(model, token, buf, sizeof buf, &len) == PI_OK);
    return std::string(buf, len);
}

// The byte-fallback token whose piece is the one raw byte b.
pi_token byte_token(const pi_model* model, unsigned char b) {
    const std::string wanted(1, static_cast<char>(b));
    for (pi_token t = 0; t < pi_n_vocab(model); ++t)
        if (piece(model, t) == wanted) return t;
    FAIL("no byte token for ", static_cast<int>(b));
    return -1;
}

std::vector<pi_token> tokenize(const pi_model* model, const std::string& text, int32_t add_bos) {
    std::vector<pi_token> tokens(text.size() + 2);
    size_t n = 0;
    REQUIRE(pi_tokenize(model, text.data(), text.size(), add_bos, tokens.data(), tokens.size(),
                        &n) == PI_OK);
    tokens.resize(n);
    return tokens;
}

// Words of several characters each, as the vocabulary splits "In the beginning God created".
std::vector<pi_token> words(const pi_model* model) {
    const std::vector<pi_token> tokens = tokenize(model, "In the beginning God created", 0);
    REQUIRE(tokens.size() >= 3);
    for (size_t i = 0; i < 3; ++i)
        REQUIRE(piece(model, tokens[i]).size() >= 2);
    return tokens;
}

bool last_error_has(const char* part) {
    return std::string(pi_last_error()).find(part) != std::string::npos;
}

} // namespace

TEST_CASE("a text stream holds the bytes of a split character back until it is whole") {
    model_handle m;
    stream_handle s(m.model, {});
    const pi_token word = words(m.model)[0];
    // U+20AC, the euro sign, is E2 82 AC.
    const pi_token e2 = byte_token(m.model, 0xE2);
    const pi_token b82 = byte_token(m.model, 0x82);
    const pi_token bac = byte_token(m.model, 0xAC);
    CHECK(push(s.stream, word).text == piece(m.model, word));
    CHECK(push(s.stream, e2).text.empty());
    CHECK(push(s.stream, b82).text.empty());
    const pushed whole = push(s.stream, bac);
    CHECK(whole.text == "\xE2\x82\xAC");
    CHECK_FALSE(whole.stopped);
    CHECK(flush(s.stream).empty());
}

TEST_CASE("a stop string spanning tokens ends the stream without releasing the match") {
    model_handle m;
    const std::vector<pi_token> w = words(m.model);
    const std::string a = piece(m.model, w[0]);
    const std::string b = piece(m.model, w[1]);
    const std::string c = piece(m.model, w[2]);
    // The last byte of the second word and the first of the third.
    const std::string stop = {b.back(), c.front()};
    REQUIRE(a.find(stop) == std::string::npos);
    REQUIRE((a + b).find(stop) == std::string::npos);
    stream_handle s(m.model, {"", stop.c_str()});
    const pushed first = push(s.stream, w[0]);
    const pushed second = push(s.stream, w[1]);
    CHECK_FALSE(first.stopped);
    CHECK_FALSE(second.stopped);
    // The second word's last byte may begin the stop string: it waits.
    CHECK(first.text + second.text == a + b.substr(0, b.size() - 1));
    const pushed third = push(s.stream, w[2]);
    CHECK(third.stopped);
    CHECK(first.text + second.text + third.text == a + b.substr(0, b.size() - 1));

    const char* text = nullptr;
    size_t len = 7;
    CHECK(pi_text_stream_push(s.stream, w[0], &text, &len, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("stop string"));
    CHECK(len == 0);
    // The flush after a stop releases nothing and starts over.
    CHECK(flush(s.stream).empty());
    CHECK(push(s.stream, w[0]).text == a);
}

TEST_CASE("a held prefix of a stop string is released at flush when the stop never comes") {
    model_handle m;
    const std::vector<pi_token> w = words(m.model);
    const std::string a = piece(m.model, w[0]);
    const std::string b = piece(m.model, w[1]);
    const std::string stop = b + "\x01never";
    stream_handle s(m.model, {stop.c_str()});
    CHECK(push(s.stream, w[0]).text == a);
    const pushed held = push(s.stream, w[1]);
    CHECK(held.text.empty());
    CHECK_FALSE(held.stopped);
    CHECK(flush(s.stream) == b);
    CHECK(flush(s.stream).empty());
}

TEST_CASE("flush turns an unfinished character at the end into U+FFFD") {
    model_handle m;
    stream_handle s(m.model, {});
    const pi_token word = words(m.model)[0];
    CHECK(push(s.stream, word).text == piece(m.model, word));
    CHECK(push(s.stream, byte_token(m.model, 0xE2)).text.empty());
    CHECK(push(s.stream, byte_token(m.model, 0x82)).text.empty());
    CHECK(flush(s.stream) == "\xEF\xBF\xBD");
    // Started over: a lone continuation byte is not glued to the dropped lead byte.
    CHECK(push(s.stream, word).text == piece(m.model, word));
}

TEST_CASE("pi_logits_logprobs is the log-softmax, its top most likely first and ties by id") {
    const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    double z = 0.0;
    for (const float l : logits)
        z += std::exp(static_cast<double>(l));
    const auto expected = [&](size_t id) { return static_cast<double>(logits[id]) - std::log(z); };

    float logprob = 0.0f;
    pi_token top_tokens[4] = {-1, -1, -1, -1};
    float top_logprobs[4] = {};
    REQUIRE(pi_logits_logprobs(logits.data(), 5, 2, 4, &logprob, top_tokens, top_logprobs) ==
            PI_OK);
    const pi_token order[4] = {1, 3, 0, 4};
    for (size_t i = 0; i < 4; ++i) {
        CHECK(top_tokens[i] == order[i]);
        CHECK(std::fabs(top_logprobs[i] - expected(static_cast<size_t>(order[i]))) < 1e-5);
    }
    CHECK(std::fabs(logprob - expected(2)) < 1e-5);

    // Without alternatives the top arrays may be NULL.
    float alone = 0.0f;
    REQUIRE(pi_logits_logprobs(logits.data(), 5, 4, 0, &alone, nullptr, nullptr) == PI_OK);
    CHECK(std::fabs(alone - expected(4)) < 1e-5);
}

TEST_CASE("pi_logits_logprobs rejects bad arguments, saying which") {
    const std::vector<float> logits(70, 0.25f);
    float lp = 0.0f;
    pi_token tt[65];
    float tl[65];
    CHECK(pi_logits_logprobs(nullptr, 70, 0, 1, &lp, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'logits'"));
    CHECK(pi_logits_logprobs(logits.data(), 70, 0, 1, nullptr, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'logprob'"));
    CHECK(pi_logits_logprobs(logits.data(), 0, 0, 0, &lp, nullptr, nullptr) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("n_vocab"));
    CHECK(pi_logits_logprobs(logits.data(), 70, 70, 1, &lp, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("token 70"));
    CHECK(pi_logits_logprobs(logits.data(), 70, -1, 1, &lp, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("token -1"));
    CHECK(pi_logits_logprobs(logits.data(), 70, 0, -1, &lp, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("n_top"));
    CHECK(pi_logits_logprobs(logits.data(), 70, 0, 65, &lp, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("n_top"));
    CHECK(pi_logits_logprobs(logits.data(), 3, 0, 4, &lp, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("n_vocab = 3"));
    CHECK(pi_logits_logprobs(logits.data(), 70, 0, 2, &lp, nullptr, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'top_tokens'"));
    CHECK(pi_logits_logprobs(logits.data(), 70, 0, 2, &lp, tt, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'top_logprobs'"));
    std::vector<float> with_nan = logits;
    with_nan[5] = NAN;
    CHECK(pi_logits_logprobs(with_nan.data(), 70, 0, 1, &lp, tt, tl) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("NaN"));
    CHECK(pi_logits_logprobs(logits.data(), 70, 0, 64, &lp, tt, tl) == PI_OK);
}

TEST_CASE("the text stream functions reject bad arguments, saying which") {
    model_handle m;
    pi_text_stream* out = reinterpret_cast<pi_text_stream*>(&m);
    const char* stop[2] = {"amen", nullptr};
    CHECK(pi_text_stream_create(m.model, stop, 1, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'out'"));
    CHECK(pi_text_stream_create(nullptr, stop, 1, &out) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'model'"));
    CHECK(out == nullptr);
    CHECK(pi_text_stream_create(m.model, nullptr, 1, &out) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'stop'"));
    CHECK(pi_text_stream_create(m.model, stop, 2, &out) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("stop string 1 is NULL"));
    CHECK(out == nullptr);
    pi_text_stream_free(nullptr);

    REQUIRE(pi_text_stream_create(m.model, nullptr, 0, &out) == PI_OK);
    CHECK(push(out, byte_token(m.model, 0xE2)).text.empty());
    const char* text = nullptr;
    size_t len = 0;
    int32_t stopped = 0;
    CHECK(pi_text_stream_push(nullptr, 5, &text, &len, &stopped) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'stream'"));
    CHECK(pi_text_stream_push(out, 5, nullptr, &len, &stopped) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'text'"));
    CHECK(pi_text_stream_push(out, 5, &text, nullptr, &stopped) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'len'"));
    const int32_t n_vocab = pi_n_vocab(m.model);
    CHECK(pi_text_stream_push(out, n_vocab, &text, &len, &stopped) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("outside the vocabulary"));
    CHECK(pi_text_stream_push(out, -1, &text, &len, &stopped) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("token -1"));
    CHECK(pi_text_stream_flush(nullptr, &text, &len) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'stream'"));
    CHECK(pi_text_stream_flush(out, nullptr, &len) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'text'"));
    CHECK(pi_text_stream_flush(out, &text, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_has("'len'"));
    // The rejected calls left the held byte as it was.
    CHECK(flush(out) == "\xEF\xBF\xBD");
    pi_text_stream_free(out);
}

namespace {

// The text a run released: per generated token, and in all (the final flush included).
struct streamed {
    std::vector<std::string> per_token;
    std::vector<pi_token> tokens;
    std::vector<float> logprobs;
    std::vector<std::vector<pi_token>> top_tokens;
    std::string text;
    int32_t stop_reason = PI_STOP_NONE;
};

constexpr int32_t n_probs = 3;

streamed with_pi_generate(pi_model* model, const char* prompt, int32_t max_tokens,
                          const std::vector<const char*>& stop) {
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    pi_context* ctx = nullptr;
    REQUIRE(pi_context_create(model, &cp, &ctx) == PI_OK);
    streamed out;
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = max_tokens;
    gp.temperature = 0.0f;
    gp.stop = stop.data();
    gp.n_stop = stop.size();
    gp.n_probs = n_probs;
    gp.callback = [](const char* t, size_t n, void* u) {
        static_cast<streamed*>(u)->text.append(t, n);
        return 1;
    };
    gp.on_token = [](const pi_token_event* e, void* u) {
        auto* s = static_cast<streamed*>(u);
        s->per_token.emplace_back(e->text, e->len);
        s->tokens.push_back(e->token);
        s->logprobs.push_back(e->logprob);
        s->top_tokens.emplace_back(e->top_tokens, e->top_tokens + e->n_top);
        return 1;
    };
    gp.user_data = &out;
    pi_generate_result r{};
    r.struct_size = sizeof(r);
    REQUIRE(pi_generate(ctx, prompt, &gp, &r) == PI_OK);
    out.stop_reason = r.stop_reason;
    pi_context_free(ctx);
    return out;
}

// The same with pi_context_decode, pi_sample and pi_text_stream, as a server's loop runs it.
streamed by_hand(pi_model* model, const char* prompt, int32_t max_tokens,
                 const std::vector<const char*>& stop) {
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    pi_context* ctx = nullptr;
    REQUIRE(pi_context_create(model, &cp, &ctx) == PI_OK);
    pi_sampler_params sp = pi_sampler_default_params();
    sp.temperature = 0.0f;
    pi_sampler* sampler = nullptr;
    REQUIRE(pi_sampler_create_for_model(model, &sp, &sampler) == PI_OK);
    stream_handle s(model, stop);
    const int32_t n_vocab = pi_n_vocab(model);

    streamed out;
    std::vector<pi_token> batch = tokenize(model, prompt, 1);
    // pi_generate's sampler sees the prompt in its history, as the penalties would want.
    for (const pi_token t : batch)
        REQUIRE(pi_sampler_accept(sampler, t) == PI_OK);
    for (int32_t step = 0; step < max_tokens; ++step) {
        pi_seq_batch b{};
        b.struct_size = sizeof(b);
        b.n_tokens = static_cast<int32_t>(batch.size());
        b.tokens = batch.data();
        REQUIRE(pi_context_decode(ctx, &b) == PI_OK);
        const float* logits = pi_get_logits(ctx, -1);
        REQUIRE(logits != nullptr);
        pi_token token = -1;
        REQUIRE(pi_sample(sampler, logits, n_vocab, &token) == PI_OK);
        if (pi_token_is_eog(model, token)) {
            out.stop_reason = PI_STOP_EOS;
            break;
        }
        float logprob = 0.0f;
        std::vector<pi_token> top(n_probs);
        std::vector<float> top_logprobs(n_probs);
        REQUIRE(pi_logits_logprobs(logits, n_vocab, token, n_probs, &logprob, top.data(),
                                   top_logprobs.data()) == PI_OK);
        const pushed p = push(s.stream, token);
        out.per_token.push_back(p.text);
        out.tokens.push_back(token);
        out.logprobs.push_back(logprob);
        out.top_tokens.push_back(top);
        out.text += p.text;
        if (p.stopped) {
            out.stop_reason = PI_STOP_STRING;
            break;
        }
        batch = {token};
    }
    if (out.stop_reason == PI_STOP_NONE) out.stop_reason = PI_STOP_MAX_TOKENS;
    if (out.stop_reason != PI_STOP_STRING) out.text += flush(s.stream);
    pi_sampler_free(sampler);
    pi_context_free(ctx);
    return out;
}

void check_same(const streamed& a, const streamed& b) {
    CHECK(a.stop_reason == b.stop_reason);
    CHECK(a.tokens == b.tokens);
    CHECK(a.per_token == b.per_token);
    CHECK(a.top_tokens == b.top_tokens);
    REQUIRE(a.logprobs.size() == b.logprobs.size());
    for (size_t i = 0; i < a.logprobs.size(); ++i)
        CHECK(std::fabs(a.logprobs[i] - b.logprobs[i]) < 1e-5);
    CHECK(a.text == b.text);
}

} // namespace

TEST_CASE("a hand loop with pi_text_stream streams what greedy pi_generate streams") {
    model_handle m;
    const char* prompt = "In the beginning God created";
    const int32_t max_tokens = 24;
    const streamed free_run = with_pi_generate(m.model, prompt, max_tokens, {});
    REQUIRE(free_run.tokens.size() >= 4);
    CHECK(!free_run.text.empty());
    check_same(free_run, by_hand(m.model, prompt, max_tokens, {}));

    // A stop string from the middle of that text ends both at the same token.
    const size_t half = free_run.text.size() / 2;
    const std::string stop = free_run.text.substr(half, 3);
    const std::vector<const char*> stops = {stop.c_str()};
    const streamed stopped = with_pi_generate(m.model, prompt, max_tokens, stops);
    CHECK(stopped.stop_reason == PI_STOP_STRING);
    CHECK(stopped.text.size() <= half);
    check_same(stopped, by_hand(m.model, prompt, max_tokens, stops));
}
