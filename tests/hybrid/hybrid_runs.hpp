#pragma once
// Decoding runs shared by the hybrid tests: a fixed prompt, then tokens one at a time in a
// 64-cell context, with or without an offload device.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/context.hpp"
#include "engine/offload.hpp"
#include "model/model.hpp"

namespace pi::test {

// BOS and the first tokens of "In the beginning God created the heaven and the earth." in the
// fixture's vocabulary (its line in tests/data/relu-llama-kjv.vocab.gguf.out).
inline const std::vector<int32_t> hybrid_prompt = {1, 1064, 261, 2096, 395, 3588, 261, 740};

// The runs' context: 64 cells, one thread.
inline context_options run_options(const offload* off) {
    context_options co;
    co.n_ctx = 64;
    co.n_threads = 1;
    co.offloaded = off;
    return co;
}

// The logits after the prompt and after each of the n_new tokens that follow it. With `tokens`
// empty the run is greedy and appends its tokens there; otherwise it decodes those tokens.
inline std::vector<std::vector<float>> decode_run(const model& m, const offload* off,
                                                  std::vector<int32_t>& tokens, int n_new) {
    context ctx(m, run_options(off));
    ctx.decode(batch_view{hybrid_prompt, {}, {}});
    const bool greedy = tokens.empty();
    std::vector<std::vector<float>> steps;
    for (int i = 0; i < n_new; ++i) {
        const auto l = ctx.logits(-1);
        steps.emplace_back(l.begin(), l.end());
        if (greedy)
            tokens.push_back(
                static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
        const int32_t one[1] = {tokens[static_cast<size_t>(i)]};
        ctx.decode(batch_view{one, {}, {}});
    }
    return steps;
}

// The stats of the prompt alone, one batch of hybrid_prompt.size() tokens.
inline run_stats prompt_stats(const model& m, const offload* off) {
    context ctx(m, run_options(off));
    ctx.decode(batch_view{hybrid_prompt, {}, {}});
    return ctx.stats();
}

// The prompt, then n_new greedy tokens one at a time; the stats of the decoded tokens alone.
inline run_stats decode_stats(const model& m, const offload* off, int n_new) {
    context ctx(m, run_options(off));
    ctx.decode(batch_view{hybrid_prompt, {}, {}});
    ctx.reset_stats();
    for (int i = 0; i < n_new; ++i) {
        const auto l = ctx.logits(-1);
        const int32_t one[1] = {
            static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin())};
        ctx.decode(batch_view{one, {}, {}});
    }
    return ctx.stats();
}

} // namespace pi::test
