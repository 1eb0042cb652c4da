#pragma once
// What the concurrency tests share: one tiny model file per seed, RAII handles and a greedy
// decode loop whose every logit is kept, so runs on different threads compare bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/api_test_data.hpp"
#include "powerinfer.h"

namespace threads_test {

// The path of a tiny synthetic model, written on first use for each seed (call it on the test's
// own thread: it REQUIREs).
std::string tiny_model(uint64_t seed);

struct model_handle {
    pi_model* model = nullptr;
    explicit model_handle(const std::string& path);
    ~model_handle() { pi_model_free(model); }
    model_handle(const model_handle&) = delete;
    model_handle& operator=(const model_handle&) = delete;
};

struct context_handle {
    pi_context* ctx = nullptr;
    context_handle(pi_model* model, int32_t n_threads, int32_t n_ctx = 256);
    ~context_handle() { pi_context_free(ctx); }
    context_handle(const context_handle&) = delete;
    context_handle& operator=(const context_handle&) = delete;
};

std::vector<pi_token> tokenize(pi_model* model, const std::string& text);

// The tokens a greedy decode chose and the logits of every step. Equal means the same tokens and
// the same logit bits (not float ==, which takes -0 for 0).
struct greedy_run {
    std::vector<pi_token> tokens;
    std::vector<float> logits;
    bool operator==(const greedy_run& other) const;
};

// Decodes `prompt` as one batch, then n_new tokens one at a time, always taking the argmax. It
// asserts nothing, so it may run on any thread: a failed call ends the run early, and a short
// run equals no reference.
greedy_run greedy_decode(pi_model* model, pi_context* ctx, const std::vector<pi_token>& prompt,
                         int n_new);

} // namespace threads_test
