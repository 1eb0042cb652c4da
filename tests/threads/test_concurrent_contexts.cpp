// Contexts of one shared model decoding at once: the model is immutable, each context owns its
// cache and scratch, and the result does not depend on how many threads computed it.
#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <vector>

#include "threads_support.hpp"

using namespace threads_test;

TEST_CASE("contexts on one model decoding in parallel threads match a single-threaded run") {
    const model_handle m(tiny_model(11));
    const std::vector<pi_token> prompt =
        tokenize(m.model, "In the beginning God created the heaven and the earth.");
    constexpr int n_new = 12;
    greedy_run reference;
    {
        const context_handle single(m.model, 1);
        reference = greedy_decode(m.model, single.ctx, prompt, n_new);
    }
    REQUIRE(reference.tokens.size() == n_new);

    // Half of the contexts run two kernel threads, so the TBB workers of different contexts
    // overlap too. Created here (they REQUIRE), each is then used by its own thread only.
    constexpr int n_contexts = 4;
    std::vector<std::unique_ptr<context_handle>> contexts;
    for (int i = 0; i < n_contexts; ++i)
        contexts.push_back(std::make_unique<context_handle>(m.model, 1 + i % 2));
    std::vector<greedy_run> runs(n_contexts);
    std::vector<std::thread> threads;
    for (int i = 0; i < n_contexts; ++i)
        threads.emplace_back([&, i] {
            pi_context* ctx = contexts[i]->ctx;
            // Twice on the same context: the second run starts from a truncated cache.
            runs[i] = greedy_decode(m.model, ctx, prompt, n_new);
            if (greedy_decode(m.model, ctx, prompt, n_new) != runs[i]) runs[i] = {};
        });
    for (std::thread& t : threads)
        t.join();
    for (int i = 0; i < n_contexts; ++i) {
        CAPTURE(i);
        CHECK(runs[i].tokens == reference.tokens);
        CHECK(runs[i] == reference); // every logit, bit for bit
    }
}
