#include "threads_support.hpp"

#include <algorithm>
#include <cstring>
#include <map>

namespace threads_test {

std::string tiny_model(uint64_t seed) {
    static std::map<uint64_t, std::string> written;
    auto [it, fresh] = written.try_emplace(seed);
    if (fresh) {
        it->second =
            std::string(PI_TEST_BINARY_DIR) + "/threads_tiny_" + std::to_string(seed) + ".gguf";
        write_tiny_model(it->second, seed);
    }
    return it->second;
}

model_handle::model_handle(const std::string& path) {
    REQUIRE(pi_model_load(path.c_str(), nullptr, &model) == PI_OK);
}

context_handle::context_handle(pi_model* model, int32_t n_threads, int32_t n_ctx) {
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_threads = n_threads;
    REQUIRE(pi_context_create(model, &cp, &ctx) == PI_OK);
}

std::vector<pi_token> tokenize(pi_model* model, const std::string& text) {
    std::vector<pi_token> tokens(text.size() + 2);
    size_t n = 0;
    REQUIRE(pi_tokenize(model, text.data(), text.size(), 1, tokens.data(), tokens.size(), &n) ==
            PI_OK);
    tokens.resize(n);
    return tokens;
}

bool greedy_run::operator==(const greedy_run& other) const {
    return tokens == other.tokens && logits.size() == other.logits.size() &&
           (logits.empty() ||
            std::memcmp(logits.data(), other.logits.data(), logits.size() * sizeof(float)) == 0);
}

greedy_run greedy_decode(pi_model* model, pi_context* ctx, const std::vector<pi_token>& prompt,
                         int n_new) {
    greedy_run run;
    if (pi_kv_truncate(ctx, 0) != PI_OK) return run;
    const int32_t n_vocab = pi_n_vocab(model);
    std::vector<pi_token> batch_tokens = prompt;
    for (int step = 0; step < n_new; ++step) {
        const pi_batch batch{static_cast<int32_t>(batch_tokens.size()), batch_tokens.data(),
                             nullptr, nullptr};
        if (pi_decode(ctx, &batch) != PI_OK) return run;
        const float* logits = pi_get_logits(ctx, -1);
        if (!logits) return run;
        run.logits.insert(run.logits.end(), logits, logits + n_vocab);
        const pi_token next =
            static_cast<pi_token>(std::max_element(logits, logits + n_vocab) - logits);
        run.tokens.push_back(next);
        batch_tokens.assign(1, next);
    }
    return run;
}

} // namespace threads_test
