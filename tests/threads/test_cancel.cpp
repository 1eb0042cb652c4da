// pi_context_cancel from another thread, the one call the threading contract allows on a context
// in use: it stops a long prompt batch and a generation, and the context works on afterwards.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "threads_support.hpp"

using namespace threads_test;

namespace {

// Holds the decoding thread inside layer 0's FFN of a chosen batch until the other thread has
// cancelled, so the cancel provably lands while that batch runs.
struct cancel_handshake {
    int32_t min_batch_tokens = 1; // the batch to hold: the first with at least this many tokens,
    int32_t max_batch_tokens = 1 << 30; // and at most this many,
    int skip_batches = 0;               // after skipping this many such batches
    std::atomic<bool> held{false};
    std::atomic<bool> cancelled{false};
};

int hold_until_cancelled(int32_t layer, int32_t n_tokens, const float*, int32_t, const float*,
                         int32_t, void* user_data) {
    auto* h = static_cast<cancel_handshake*>(user_data);
    if (layer != 0 || n_tokens < h->min_batch_tokens || n_tokens > h->max_batch_tokens) return 1;
    if (h->skip_batches-- > 0 || h->held.exchange(true)) return 1;
    while (!h->cancelled.load())
        std::this_thread::yield();
    return 1;
}

std::thread cancel_when_held(pi_context* ctx, cancel_handshake& h) {
    return std::thread([ctx, &h] {
        while (!h.held.load())
            std::this_thread::yield();
        pi_context_cancel(ctx);
        h.cancelled = true;
    });
}

std::vector<pi_token> long_prompt(pi_model* model) {
    std::string text;
    for (int i = 0; i < 12; ++i)
        text += "And God said, Let there be light: and there was light. ";
    return tokenize(model, text);
}

struct generation {
    pi_status status = PI_ERR_INTERNAL;
    pi_generate_result result{};
    std::string text;
};

generation generate_greedy(pi_context* ctx, const char* prompt, int max_tokens) {
    generation g;
    g.result.struct_size = sizeof(g.result);
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = max_tokens;
    gp.temperature = 0.0f;
    gp.reuse_cache = 0;
    gp.callback = [](const char* t, size_t len, void* u) {
        static_cast<std::string*>(u)->append(t, len);
        return 1;
    };
    gp.user_data = &g.text;
    g.status = pi_generate(ctx, prompt, &gp, &g.result);
    return g;
}

} // namespace

TEST_CASE("a cancel from another thread stops a long prompt batch; the context decodes on") {
    const model_handle m(tiny_model(12));
    const std::vector<pi_token> prompt = long_prompt(m.model);
    REQUIRE(prompt.size() >= 100);
    greedy_run reference;
    {
        const context_handle fresh(m.model, 2);
        reference = greedy_decode(m.model, fresh.ctx, prompt, 4);
    }
    REQUIRE(reference.tokens.size() == 4);

    const context_handle c(m.model, 2);
    cancel_handshake h;
    h.min_batch_tokens = static_cast<int32_t>(prompt.size());
    REQUIRE(pi_context_set_ffn_observer(c.ctx, &hold_until_cancelled, &h) == PI_OK);
    std::thread canceller = cancel_when_held(c.ctx, h);
    const pi_batch batch{static_cast<int32_t>(prompt.size()), prompt.data(), nullptr, nullptr};
    const pi_status status = pi_decode(c.ctx, &batch);
    canceller.join();
    CHECK(status == PI_STATUS_CANCELLED);
    CHECK(pi_context_n_past(c.ctx) == 0); // the cache forgot the cancelled batch

    REQUIRE(pi_context_set_ffn_observer(c.ctx, nullptr, nullptr) == PI_OK);
    CHECK(greedy_decode(m.model, c.ctx, prompt, 4) == reference);
}

TEST_CASE("a cancel from another thread stops a generation mid-token; the context generates on") {
    const model_handle m(tiny_model(12));
    const char* prompt = "In the beginning";
    generation reference;
    {
        const context_handle fresh(m.model, 2);
        reference = generate_greedy(fresh.ctx, prompt, 6);
    }
    REQUIRE(reference.status == PI_OK);

    const context_handle c(m.model, 2);
    cancel_handshake h;
    h.max_batch_tokens = 1; // a generated token's decode, not the prompt's
    h.skip_batches = 2;
    REQUIRE(pi_context_set_ffn_observer(c.ctx, &hold_until_cancelled, &h) == PI_OK);
    std::thread canceller = cancel_when_held(c.ctx, h);
    const generation cancelled = generate_greedy(c.ctx, prompt, 1 << 20);
    canceller.join();
    CHECK(cancelled.status == PI_STATUS_CANCELLED);
    CHECK(cancelled.result.stop_reason == PI_STOP_CANCELLED);
    CHECK(cancelled.result.n_generated_tokens >= 2);

    REQUIRE(pi_context_set_ffn_observer(c.ctx, nullptr, nullptr) == PI_OK);
    const generation again = generate_greedy(c.ctx, prompt, 6);
    CHECK(again.status == PI_OK);
    CHECK(again.text == reference.text);
}

TEST_CASE("cancels at arbitrary moments leave the cache at a batch boundary") {
    const model_handle m(tiny_model(12));
    const std::vector<pi_token> prompt = long_prompt(m.model);
    const context_handle c(m.model, 2);
    std::atomic<bool> done{false};
    std::thread canceller([&] {
        while (!done.load()) {
            pi_context_cancel(c.ctx);
            std::this_thread::yield();
        }
    });
    // Each batch either completes or is forgotten whole, wherever the cancel lands.
    int n_ok = 0;
    int n_cancelled = 0;
    for (int i = 0; i < 40; ++i) {
        const int32_t before = pi_context_n_past(c.ctx);
        const int32_t n = i % 4 == 0 ? 16 : 1;
        const pi_batch batch{n, prompt.data(), nullptr, nullptr};
        const pi_status status = pi_decode(c.ctx, &batch);
        if (status == PI_OK) {
            ++n_ok;
            CHECK(pi_context_n_past(c.ctx) == before + n);
        } else {
            ++n_cancelled;
            CHECK(status == PI_STATUS_CANCELLED);
            CHECK(pi_context_n_past(c.ctx) == before);
        }
    }
    done = true;
    canceller.join();
    MESSAGE(n_ok, " batches completed, ", n_cancelled, " cancelled");
    const pi_batch one{1, prompt.data(), nullptr, nullptr};
    CHECK(pi_decode(c.ctx, &one) == PI_OK);
}
