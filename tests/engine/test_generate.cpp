// Generation over a kept cache: a chat's turns decode only their new tokens, a full context
// shifts, and every token is reported with its log-probability.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/context.hpp"
#include "engine/generate.hpp"
#include "model/model.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace pi;

namespace {

const model& chat_model() {
    static const auto m = [] {
        static const std::string dir = test::scratch_dir("generate");
        return model::load(test::write_tiny_model(dir, "chat.gguf", test::tiny_model_options(true)),
                           load_options{});
    }();
    return *m;
}

sampler greedy() {
    sampler_options o;
    o.temperature = 0.0f;
    return sampler(o);
}

bool append_text(const char* t, size_t n, void* u) {
    static_cast<std::string*>(u)->append(t, n);
    return true;
}

} // namespace

TEST_CASE("each turn of a chat decodes only the tokens the cache does not hold") {
    context_options co;
    co.n_ctx = 512;
    context ctx(chat_model(), co);
    sampler smp = greedy();
    generate_options o;
    o.max_tokens = 8;
    std::string transcript;
    o.on_text = append_text;
    o.user_data = &transcript;
    uint64_t decoded_before = 0;
    for (int turn = 0; turn < 10; ++turn) {
        const std::string user = " And the earth was without form, turn " + std::to_string(turn);
        transcript += user;
        const size_t sent = chat_model().vocab().encode(transcript, true).size();
        const generate_result r = generate(ctx, smp, transcript, o);
        const run_stats& s = ctx.stats();
        const uint64_t decoded = s.n_prompt_tokens + s.n_decode_tokens;
        CHECK(r.n_prompt_tokens == static_cast<int32_t>(sent));
        if (turn > 0) {
            // The reply's tokens and the text before the new turn come from the cache; only a few
            // tokens where the texts meet are decoded again.
            CHECK(r.n_cached_tokens > 0);
            const auto user_tokens =
                static_cast<int32_t>(chat_model().vocab().encode(user, false).size());
            CHECK(r.n_prompt_tokens - r.n_cached_tokens <= user_tokens + 8);
        }
        // What this call decoded: its new prompt tokens and its replies but the last.
        CHECK(decoded - decoded_before ==
              static_cast<uint64_t>(r.n_prompt_tokens - r.n_cached_tokens) +
                  static_cast<uint64_t>(std::max(0, r.n_generated_tokens - 1)));
        decoded_before = decoded;
    }
}

TEST_CASE("a cached prompt generates what a fresh context generates") {
    context_options co;
    co.n_ctx = 128;
    context warm(chat_model(), co), cold(chat_model(), co);
    generate_options o;
    o.max_tokens = 6;
    std::string first_text, warm_text, cold_text;
    o.on_text = append_text;
    o.user_data = &first_text;
    sampler a = greedy();
    generate(warm, a, "In the beginning", o);
    const std::string longer = "In the beginning" + first_text + " and the";
    o.user_data = &warm_text;
    sampler b = greedy();
    const generate_result r = generate(warm, b, longer, o);
    CHECK(r.n_cached_tokens > 0);
    o.user_data = &cold_text;
    sampler c = greedy();
    generate(cold, c, longer, o);
    CHECK(warm_text == cold_text);
}

TEST_CASE("reuse off clears the sequence first") {
    context ctx(chat_model(), context_options{});
    sampler smp = greedy();
    generate_options o;
    o.max_tokens = 2;
    generate(ctx, smp, "In the beginning", o);
    o.reuse_cache = false;
    const generate_result r = generate(ctx, smp, "In the beginning", o);
    CHECK(r.n_cached_tokens == 0);
}

TEST_CASE("a full context shifts instead of stopping when asked") {
    context_options co;
    co.n_ctx = 24;
    context ctx(chat_model(), co);
    sampler smp = greedy();
    generate_options o;
    o.max_tokens = 60;
    const generate_result stopped = generate(ctx, smp, "In the beginning God", o);
    CHECK(stopped.reason == stop_reason::context_full);
    CHECK(stopped.n_context_shifts == 0);

    o.context_shift = true;
    o.n_keep = 1;
    o.reuse_cache = false;
    const generate_result shifted = generate(ctx, smp, "In the beginning God", o);
    CHECK(shifted.reason == stop_reason::max_tokens);
    CHECK(shifted.n_generated_tokens == 60);
    CHECK(shifted.n_context_shifts >= 2);
    CHECK(ctx.cache().pos_max(0) < co.n_ctx);
    CHECK(ctx.cache().leading_tokens(0).front() == chat_model().vocab().vocabulary().bos);
}

TEST_CASE("token events carry the token, its log-probability, alternatives and the text") {
    context ctx(chat_model(), context_options{});
    sampler smp = greedy();
    struct seen {
        std::string text, event_text;
        int events = 0;
        bool ordered = true, chosen_is_top = true, normalised = true;
    } s;
    generate_options o;
    o.max_tokens = 5;
    o.n_probs = 3;
    o.on_text = [](const char* t, size_t n, void* u) {
        static_cast<seen*>(u)->text.append(t, n);
        return true;
    };
    o.on_token = [](const token_event& e, void* u) {
        auto* st = static_cast<seen*>(u);
        ++st->events;
        st->event_text.append(e.text);
        const auto& top = e.logprobs->top;
        st->ordered &=
            top.size() == 3 && top[0].logprob >= top[1].logprob && top[1].logprob >= top[2].logprob;
        // Greedy picks the most probable token.
        st->chosen_is_top &=
            !top.empty() && top[0].token == e.token && e.logprobs->chosen.logprob == top[0].logprob;
        st->normalised &= e.logprobs->chosen.logprob <= 0.0f;
        return true;
    };
    o.user_data = &s;
    const generate_result r = generate(ctx, smp, "In the beginning", o);
    CHECK(s.events == r.n_generated_tokens);
    CHECK(s.event_text == s.text);
    CHECK(s.ordered);
    CHECK(s.chosen_is_top);
    CHECK(s.normalised);

    o.n_probs = 65;
    CHECK_THROWS_AS(generate(ctx, smp, "x", o), error);
    o.n_probs = 0;
    o.seq = 1;
    CHECK_THROWS_AS(generate(ctx, smp, "x", o), error);
}

TEST_CASE("seeded sampling gives the same tokens for 1 and 2 threads and any batch split") {
    const auto run = [](int32_t threads, int32_t n_batch) {
        context_options co;
        co.n_threads = threads;
        co.n_batch = n_batch;
        context ctx(chat_model(), co);
        sampler_options so;
        so.seed = 1234;
        so.temperature = 1.0f;
        so.repeat_penalty = 1.2f;
        sampler smp(so, &chat_model().vocab());
        struct recorded {
            std::vector<int32_t> tokens;
        } r;
        generate_options o;
        o.max_tokens = 24;
        o.on_token = [](const token_event& e, void* u) {
            static_cast<recorded*>(u)->tokens.push_back(e.token);
            return true;
        };
        o.user_data = &r;
        generate(ctx, smp, "In the beginning God created the heaven and the earth", o);
        return r.tokens;
    };
    const std::vector<int32_t> reference = run(1, 512);
    CHECK(reference.size() == 24);
    CHECK(run(2, 512) == reference);
    CHECK(run(1, 3) == reference);
    CHECK(run(2, 5) == reference);
}
