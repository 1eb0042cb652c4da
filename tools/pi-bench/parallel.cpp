#include "parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "tool.h"

namespace pi::bench {

namespace {

using context_ptr = std::unique_ptr<pi_context, decltype(&pi_context_free)>;

// Not the seed of the pp and tg token stream: each sequence has a prompt of its own.
constexpr uint32_t prompt_seed = 4321;

bool failed(const char* what, pi_status status, std::string& message) {
    if (status == PI_OK) return false;
    message =
        std::string("--parallel: ") + what + ": " + pi_status_str(status) + ": " + pi_last_error();
    return true;
}

// Greedy: the first of the largest logits.
pi_token argmax(const float* logits, int n_vocab) {
    return static_cast<pi_token>(std::max_element(logits, logits + n_vocab) - logits);
}

pi_seq_batch seq_batch(const std::vector<pi_token>& tokens, const std::vector<pi_seq_id>& ids) {
    pi_seq_batch batch{};
    batch.struct_size = sizeof batch;
    batch.n_tokens = static_cast<int32_t>(tokens.size());
    batch.tokens = tokens.data();
    batch.seq_id = ids.data();
    return batch; // pos and logits NULL: each token follows its sequence, each has its logits
}

// The first n sequences: an empty cache, each prompt in a batch of its own (untimed), then n_gen
// steps that each decode one token of every sequence, the greedy pick of its last logits.
bool run_once(pi_context* ctx, const std::vector<std::vector<pi_token>>& prompts, size_t n,
              int n_gen, int n_vocab, double& seconds, std::string& message) {
    if (failed("pi_kv_seq_remove", pi_kv_seq_remove(ctx, -1, -1, -1), message)) return false;
    std::vector<pi_token> next(n);
    for (size_t s = 0; s < n; ++s) {
        const std::vector<pi_seq_id> ids(prompts[s].size(), static_cast<pi_seq_id>(s));
        const pi_seq_batch prompt = seq_batch(prompts[s], ids);
        if (failed("prompt", pi_context_decode(ctx, &prompt), message)) return false;
        next[s] = argmax(pi_get_logits(ctx, -1), n_vocab);
    }
    std::vector<pi_seq_id> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    const pi_seq_batch step = seq_batch(next, ids);
    const double start = tool_seconds();
    for (int i = 0; i < n_gen; ++i) {
        if (failed("step", pi_context_decode(ctx, &step), message)) return false;
        for (size_t s = 0; s < n; ++s)
            next[s] = argmax(pi_get_logits(ctx, static_cast<int32_t>(s)), n_vocab);
    }
    seconds = tool_seconds() - start;
    return true;
}

} // namespace

double parallel_result::ratio() const {
    return single_tokens_per_second.median > 0
               ? aggregate_tokens_per_second.median / single_tokens_per_second.median
               : NAN;
}

bool measure_parallel(pi_model* model, const options& o, parallel_result& out,
                      std::string& message) {
    const size_t n = static_cast<size_t>(o.parallel);
    const int n_prompt = std::max(1, o.n_prompt);
    const int64_t n_ctx = int64_t{o.parallel} * (n_prompt + o.n_gen) + ctx_slack;
    if (n_ctx > INT32_MAX) {
        message = "--parallel: " + std::to_string(n_ctx) + " KV cache cells needed: too many";
        return false;
    }
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = static_cast<int32_t>(n_ctx);
    cp.n_batch = std::max(n_prompt, o.parallel);
    cp.n_threads = o.threads;
    cp.n_seq_max = o.parallel;
    pi_context* raw = nullptr;
    const pi_status created = pi_context_create(model, &cp, &raw);
    context_ptr ctx(raw, pi_context_free);
    if (failed("pi_context_create", created, message)) return false;

    const int n_vocab = pi_n_vocab(model);
    std::mt19937 rng(prompt_seed);
    std::uniform_int_distribution<pi_token> token(0, n_vocab - 1);
    std::vector<std::vector<pi_token>> prompts(n, std::vector<pi_token>(n_prompt));
    for (std::vector<pi_token>& prompt : prompts)
        for (pi_token& t : prompt)
            t = token(rng);

    double seconds = 0;
    for (int i = 0; i < o.warmup; ++i) {
        if (!run_once(ctx.get(), prompts, 1, o.n_gen, n_vocab, seconds, message) ||
            !run_once(ctx.get(), prompts, n, o.n_gen, n_vocab, seconds, message))
            return false;
    }
    // Alternating the two gives a change of load on the machine the same share of each.
    std::vector<double> single, aggregate;
    for (int i = 0; i < o.repetitions; ++i) {
        if (!run_once(ctx.get(), prompts, 1, o.n_gen, n_vocab, seconds, message)) return false;
        single.push_back(seconds > 0 ? o.n_gen / seconds : 0);
        if (!run_once(ctx.get(), prompts, n, o.n_gen, n_vocab, seconds, message)) return false;
        aggregate.push_back(seconds > 0 ? static_cast<double>(n) * o.n_gen / seconds : 0);
    }
    out.n_sequences = o.parallel;
    out.n_prompt = n_prompt;
    out.n_gen = o.n_gen;
    out.single_tokens_per_second = summarize(single);
    out.aggregate_tokens_per_second = summarize(aggregate);
    return true;
}

} // namespace pi::bench
