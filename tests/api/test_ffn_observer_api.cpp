// pi_context_set_ffn_observer through the public library, as a predictor trainer uses it.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api_test_data.hpp"
#include "powerinfer.h"

namespace {

// A tiny sparse model; noise > 0 makes the predictor miss some neurons and pick some idle ones.
std::string observer_model(float noise) {
    const std::string out = std::string(PI_TEST_BINARY_DIR) + "/observer_noise" +
                            std::to_string(static_cast<int>(noise * 100)) + ".gguf";
    write_tiny_model(out, 11, noise);
    return out;
}

struct opened {
    pi_model* model = nullptr;
    pi_context* ctx = nullptr;
    opened(const std::string& path, const pi_model_params& mp, int32_t audit) {
        REQUIRE(pi_model_load(path.c_str(), &mp, &model) == PI_OK);
        pi_context_params cp = pi_context_default_params();
        cp.n_ctx = 64;
        cp.n_threads = 1;
        cp.audit_predictor = audit;
        REQUIRE(pi_context_create(model, &cp, &ctx) == PI_OK);
    }
    ~opened() {
        pi_context_free(ctx);
        pi_model_free(model);
    }
};

// Per layer: calls, tokens seen and non-zero activations; stops at `stop_at` when >= 0.
struct tally {
    int32_t n_embd = 0, n_ff = 0, stop_at = -1;
    std::vector<int32_t> layers, n_tokens;
    std::vector<uint64_t> nonzero = std::vector<uint64_t>(2, 0);
    bool shapes_ok = true;
    static int call(int32_t layer, int32_t n, const float* input, int32_t n_embd,
                    const float* activation, int32_t n_ff, void* user) {
        auto* t = static_cast<tally*>(user);
        t->layers.push_back(layer);
        t->n_tokens.push_back(n);
        t->shapes_ok &=
            input != nullptr && activation != nullptr && n_embd == t->n_embd && n_ff == t->n_ff;
        for (int64_t i = 0; i < int64_t{n} * n_ff; ++i)
            t->nonzero[static_cast<size_t>(layer)] += activation[i] != 0.0f;
        return layer == t->stop_at ? 0 : 1;
    }
};

// BOS and the first tokens of "In the beginning God created the heaven and the earth." in the
// fixture's vocabulary (its line in tests/data/relu-llama-kjv.vocab.gguf.out).
const std::vector<pi_token> prompt = {1, 1064, 261, 2096, 395, 3588, 261, 740, 270, 261};

pi_status decode(pi_context* ctx, const std::vector<pi_token>& tokens) {
    const pi_batch b{static_cast<int32_t>(tokens.size()), tokens.data(), nullptr, nullptr};
    return pi_decode(ctx, &b);
}

tally tally_for(pi_model* m) {
    pi_model_info info;
    info.struct_size = sizeof(info);
    REQUIRE(pi_model_info_get(m, &info) == PI_OK);
    tally t;
    t.n_embd = info.n_embd;
    t.n_ff = info.n_ff;
    return t;
}

pi_predictor_audit audit_of(pi_context* ctx, int32_t layer) {
    pi_predictor_audit a;
    a.struct_size = sizeof(a);
    REQUIRE(pi_predictor_audit_get(ctx, layer, &a) == PI_OK);
    return a;
}

} // namespace

TEST_CASE("pi_context_set_ffn_observer rejects a NULL context and removes with NULL") {
    CHECK(pi_context_set_ffn_observer(nullptr, tally::call, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(std::string(pi_last_error()).find("'ctx'") != std::string::npos);
    opened o(observer_model(0.0f), pi_model_default_params(), 0);
    tally t = tally_for(o.model);
    REQUIRE(pi_context_set_ffn_observer(o.ctx, tally::call, &t) == PI_OK);
    REQUIRE(decode(o.ctx, prompt) == PI_OK);
    CHECK(t.layers == std::vector<int32_t>{0, 1});
    CHECK(t.n_tokens == std::vector<int32_t>{10, 10});
    CHECK(t.shapes_ok);
    REQUIRE(decode(o.ctx, {263}) == PI_OK);
    CHECK(t.n_tokens == std::vector<int32_t>{10, 10, 1, 1});
    REQUIRE(pi_context_set_ffn_observer(o.ctx, nullptr, nullptr) == PI_OK);
    REQUIRE(decode(o.ctx, {278}) == PI_OK);
    CHECK(t.layers.size() == 4);
}

TEST_CASE("an observer returning 0 makes pi_decode return PI_STATUS_CANCELLED") {
    opened o(observer_model(0.0f), pi_model_default_params(), 0);
    REQUIRE(decode(o.ctx, {1, 1064}) == PI_OK);
    tally t = tally_for(o.model);
    t.stop_at = 0;
    REQUIRE(pi_context_set_ffn_observer(o.ctx, tally::call, &t) == PI_OK);
    CHECK(decode(o.ctx, {261, 2096, 395}) == PI_STATUS_CANCELLED);
    CHECK(std::string(pi_last_error()).find("observer") != std::string::npos);
    CHECK(t.layers == std::vector<int32_t>{0});
    CHECK(pi_context_n_past(o.ctx) == 2);
    CHECK(pi_get_logits(o.ctx, -1) == nullptr);
    REQUIRE(pi_context_set_ffn_observer(o.ctx, nullptr, nullptr) == PI_OK);
    CHECK(decode(o.ctx, {261, 2096, 395}) == PI_OK);
    CHECK(pi_context_n_past(o.ctx) == 5);
}

TEST_CASE("with dense = 1 the non-zero activations are the pairs the predictor audit calls "
          "truly active") {
    const std::string path = observer_model(0.0f);
    opened audited(path, pi_model_default_params(), 1);
    REQUIRE(decode(audited.ctx, prompt) == PI_OK);
    pi_model_params dense = pi_model_default_params();
    dense.dense = 1;
    opened all(path, dense, 0);
    tally t = tally_for(all.model);
    REQUIRE(pi_context_set_ffn_observer(all.ctx, tally::call, &t) == PI_OK);
    REQUIRE(decode(all.ctx, prompt) == PI_OK);
    const uint64_t pairs = prompt.size() * static_cast<uint64_t>(t.n_ff);
    for (int32_t il = 0; il < 2; ++il) {
        const pi_predictor_audit a = audit_of(audited.ctx, il);
        // An exact predictor: both runs see the same residual stream.
        CHECK(t.nonzero[static_cast<size_t>(il)] == a.true_active);
        CHECK(a.true_active > pairs / 50);
        CHECK(a.true_active < pairs / 3);
    }
}

TEST_CASE("in sparse inference the non-zero activations are the selected, truly active pairs") {
    opened o(observer_model(0.5f), pi_model_default_params(), 1);
    tally t = tally_for(o.model);
    REQUIRE(pi_context_set_ffn_observer(o.ctx, tally::call, &t) == PI_OK);
    REQUIRE(decode(o.ctx, prompt) == PI_OK);
    for (int32_t il = 0; il < 2; ++il) {
        const pi_predictor_audit a = audit_of(o.ctx, il);
        CHECK(a.true_positive < a.true_active); // the noisy predictor misses some
        CHECK(t.nonzero[static_cast<size_t>(il)] == a.true_positive);
    }
}

TEST_CASE("an FFN observer is refused where hot neurons run on an offload device") {
    pi_model_params mp = pi_model_default_params();
    mp.offload_device = "cpu";
    mp.vram_budget = 32.0 * 1024 * 1024;
    mp.disable_gpu_index = 0;
    opened o(observer_model(0.0f), mp, 0);
    tally t = tally_for(o.model);
    CHECK(pi_context_set_ffn_observer(o.ctx, tally::call, &t) == PI_ERR_UNSUPPORTED);
    CHECK(std::string(pi_last_error()).find("offload") != std::string::npos);
    CHECK(pi_context_set_ffn_observer(o.ctx, nullptr, nullptr) == PI_OK);
    REQUIRE(decode(o.ctx, {1, 1064}) == PI_OK);
    CHECK(t.layers.empty());
}
