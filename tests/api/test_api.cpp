#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "api_test_data.hpp"
#include "powerinfer.h"

namespace {

const std::string& tiny_model() {
    static const std::string path = [] {
        const std::string out = std::string(PI_TEST_BINARY_DIR) + "/api_tiny.gguf";
        write_tiny_model(out, 3);
        return out;
    }();
    return path;
}

struct loaded {
    pi_model* model = nullptr;
    pi_context* ctx = nullptr;
    loaded() {
        REQUIRE(pi_model_load(tiny_model().c_str(), nullptr, &model) == PI_OK);
        pi_context_params cp = pi_context_default_params();
        cp.n_ctx = 128;
        cp.n_threads = 1;
        REQUIRE(pi_context_create(model, &cp, &ctx) == PI_OK);
    }
    ~loaded() {
        pi_context_free(ctx);
        pi_model_free(model);
    }
};

std::string generate_text(pi_context* ctx, const char* prompt, int n) {
    std::string out;
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = n;
    gp.temperature = 0.0f;
    gp.callback = [](const char* t, size_t len, void* u) {
        static_cast<std::string*>(u)->append(t, len);
        return 1;
    };
    gp.user_data = &out;
    REQUIRE(pi_generate(ctx, prompt, &gp, nullptr) == PI_OK);
    return out;
}

} // namespace

TEST_CASE("status names and the version are available") {
    CHECK(std::string(pi_status_str(PI_ERR_FORMAT)) == "PI_ERR_FORMAT");
    CHECK(std::string(pi_status_str(static_cast<pi_status>(-99))) == "PI_ERR_UNKNOWN_STATUS");
    CHECK(std::string(pi_version()) == "0.4.0");
    CHECK(pi_version_number() == PI_VERSION_NUMBER);
    CHECK(pi_version_number() == 400u);
    CHECK(std::string(pi_system_info()).find("CPU backend") != std::string::npos);
}

TEST_CASE("NULL arguments give PI_ERR_INVALID_ARGUMENT and name the argument") {
    pi_model* m = reinterpret_cast<pi_model*>(0x1);
    CHECK(pi_model_load(nullptr, nullptr, &m) == PI_ERR_INVALID_ARGUMENT);
    CHECK(m == nullptr);
    CHECK(std::string(pi_last_error()).find("path") != std::string::npos);
    CHECK(pi_model_load("x", nullptr, nullptr) == PI_ERR_INVALID_ARGUMENT);
    pi_context* c = nullptr;
    CHECK(pi_context_create(nullptr, nullptr, &c) == PI_ERR_INVALID_ARGUMENT);
    size_t n = 0;
    CHECK(pi_tokenize(nullptr, "a", 1, 1, nullptr, 0, &n) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_decode(nullptr, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_generate(nullptr, "x", nullptr, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_sample(nullptr, nullptr, 0, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_synth_model_write(nullptr, "x") == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_get_logits(nullptr, 0) == nullptr);
    CHECK(pi_token_bos(nullptr) == -1);
    CHECK(pi_vocab_adds_bos(nullptr) == 0);
    pi_model_free(nullptr);
    pi_context_free(nullptr);
    pi_sampler_free(nullptr);
    pi_context_cancel(nullptr);
}

TEST_CASE("a missing file is PI_ERR_IO and a non-GGUF file is PI_ERR_FORMAT") {
    pi_model* m = nullptr;
    CHECK(pi_model_load("/nonexistent/model.gguf", nullptr, &m) == PI_ERR_IO);
    CHECK(std::string(pi_last_error()).find("/nonexistent/model.gguf") != std::string::npos);
    const std::string junk = std::string(PI_TEST_BINARY_DIR) + "/junk.gguf";
    std::ofstream(junk) << "this is not a model file at all, just text";
    CHECK(pi_model_load(junk.c_str(), nullptr, &m) == PI_ERR_FORMAT);
    CHECK(m == nullptr);
}

TEST_CASE("the last error is per thread") {
    pi_model* m = nullptr;
    CHECK(pi_model_load(nullptr, nullptr, &m) == PI_ERR_INVALID_ARGUMENT);
    std::string other;
    std::thread([&] { other = pi_last_error(); }).join();
    CHECK(other.empty());
    CHECK(std::string(pi_last_error()).size() > 0);
}

TEST_CASE("a parameter struct with a bad struct_size is rejected") {
    pi_model* m = nullptr;
    pi_model_params mp = pi_model_default_params();
    mp.struct_size = 1;
    CHECK(pi_model_load("x", &mp, &m) == PI_ERR_INVALID_ARGUMENT);
    CHECK(std::string(pi_last_error()).find("struct_size") != std::string::npos);
}

TEST_CASE("model info describes the file") {
    loaded l;
    pi_model_info info;
    info.struct_size = sizeof(info);
    REQUIRE(pi_model_info_get(l.model, &info) == PI_OK);
    CHECK(std::string(info.architecture) == "llama");
    CHECK(info.n_layer == 2);
    CHECK(info.n_vocab == 4096);
    CHECK(info.sparse == 1);
    CHECK(info.sparse_inference == 1);
    CHECK(info.predictor_rank[0] > 0);
    CHECK(info.n_params > 0);
    CHECK(std::string(info.weight_type) == "F32");
    info.struct_size = 3;
    CHECK(pi_model_info_get(l.model, &info) == PI_ERR_INVALID_ARGUMENT);
}

TEST_CASE("tokenize reports the needed size, and detokenize inverts it") {
    loaded l;
    // The fixture's SentencePiece ids (tests/data/relu-llama-kjv.vocab.gguf.out).
    const char* text = "And God said";
    size_t n = 0;
    CHECK(pi_tokenize(l.model, text, std::strlen(text), 1, nullptr, 0, &n) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(n == 4);
    std::vector<pi_token> ids(n);
    REQUIRE(pi_tokenize(l.model, text, std::strlen(text), 1, ids.data(), ids.size(), &n) == PI_OK);
    CHECK(ids == std::vector<pi_token>{1, 300, 395, 392});
    char buf[64];
    size_t len = 0;
    REQUIRE(pi_detokenize(l.model, ids.data(), ids.size(), buf, sizeof buf, &len) == PI_OK);
    CHECK(std::string(buf) == text);
    CHECK(pi_detokenize(l.model, ids.data(), ids.size(), buf, 4, &len) == PI_ERR_INVALID_ARGUMENT);
    CHECK(len == std::strlen(text));
    REQUIRE(pi_token_to_piece(l.model, 300, buf, sizeof buf, &len) == PI_OK);
    CHECK(std::string(buf, len) == " And");
    CHECK(pi_token_to_piece(l.model, 99999, buf, sizeof buf, &len) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_token_bos(l.model) == 1);
    CHECK(pi_vocab_adds_bos(l.model) == 1); // SPM
    CHECK(pi_token_eos(l.model) == 2);
    CHECK(pi_token_newline(l.model) == 13);
}

TEST_CASE("decode validates its batch and exposes logits") {
    loaded l;
    const pi_token toks[3] = {1, 300, 395};
    pi_batch b = {3, toks, nullptr, nullptr};
    REQUIRE(pi_decode(l.ctx, &b) == PI_OK);
    CHECK(pi_get_logits(l.ctx, -1) != nullptr);
    CHECK(pi_get_logits(l.ctx, 0) == nullptr);
    CHECK(pi_context_n_past(l.ctx) == 3);
    const pi_token bad[1] = {-5};
    pi_batch bb = {1, bad, nullptr, nullptr};
    CHECK(pi_decode(l.ctx, &bb) == PI_ERR_INVALID_ARGUMENT);
    CHECK(std::string(pi_last_error()).find("-5") != std::string::npos);
    pi_batch empty = {0, toks, nullptr, nullptr};
    CHECK(pi_decode(l.ctx, &empty) == PI_ERR_INVALID_ARGUMENT);
    double fraction = -1;
    REQUIRE(pi_context_layer_active_fraction(l.ctx, 1, &fraction) == PI_OK);
    CHECK(fraction > 0.0);
    CHECK(fraction < 0.3);
    CHECK(pi_context_layer_active_fraction(l.ctx, 2, &fraction) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_truncate(l.ctx, 0) == PI_OK);
    CHECK(pi_context_n_past(l.ctx) == 0);
}

TEST_CASE("absurd context parameters are rejected") {
    loaded l;
    pi_context* c = nullptr;
    pi_context_params cp = pi_context_default_params();
    cp.n_threads = -1;
    CHECK(pi_context_create(l.model, &cp, &c) == PI_ERR_INVALID_ARGUMENT);
    cp = pi_context_default_params();
    cp.n_ctx = -5;
    CHECK(pi_context_create(l.model, &cp, &c) == PI_ERR_INVALID_ARGUMENT);
    CHECK(c == nullptr);
}

TEST_CASE("greedy pi_generate is deterministic and the prompt must fit") {
    loaded l;
    const std::string a = generate_text(l.ctx, "The capital of France", 8);
    CHECK(a == generate_text(l.ctx, "The capital of France", 8));
    CHECK(!a.empty());
    std::string long_prompt;
    for (int i = 0; i < 200; ++i)
        long_prompt += "word ";
    CHECK(pi_generate(l.ctx, long_prompt.c_str(), nullptr, nullptr) == PI_ERR_CONTEXT_FULL);
}

TEST_CASE("a callback returning 0 stops pi_generate with PI_STATUS_CANCELLED") {
    loaded l;
    pi_generate_params gp = pi_generate_default_params();
    gp.callback = [](const char*, size_t, void*) { return 0; };
    pi_generate_result r;
    r.struct_size = sizeof(r);
    CHECK(pi_generate(l.ctx, "Hi", &gp, &r) == PI_STATUS_CANCELLED);
    CHECK(r.stop_reason == PI_STOP_CALLBACK);
}

TEST_CASE("the load progress callback is called and can cancel") {
    pi_model_params mp = pi_model_default_params();
    int calls = 0;
    mp.progress = [](float p, void* u) {
        ++*static_cast<int*>(u);
        return p < 0.5f ? 1 : 0;
    };
    mp.progress_user_data = &calls;
    pi_model* m = nullptr;
    CHECK(pi_model_load(tiny_model().c_str(), &mp, &m) == PI_STATUS_CANCELLED);
    CHECK(m == nullptr);
    CHECK(calls > 0);
}

TEST_CASE("the sampler API samples greedily at temperature 0") {
    pi_sampler_params sp = pi_sampler_default_params();
    sp.temperature = 0.0f;
    pi_sampler* s = nullptr;
    REQUIRE(pi_sampler_create(&sp, &s) == PI_OK);
    const float logits[4] = {0.1f, 3.0f, 2.0f, -1.0f};
    pi_token t = -1;
    CHECK(pi_sample(s, logits, 4, &t) == PI_OK);
    CHECK(t == 1);
    CHECK(pi_sample(s, logits, 0, &t) == PI_ERR_INVALID_ARGUMENT);
    pi_sampler_free(s);
}

TEST_CASE("the log callback receives warnings") {
    std::atomic<int> warnings{0};
    pi_log_set(
        [](pi_log_level level, const char*, void* u) {
            if (level >= PI_LOG_WARN) ++*static_cast<std::atomic<int>*>(u);
        },
        &warnings);
    setenv("LLAMA_SPARSE_PRED_THRESHOLD", "not-a-number", 1);
    pi_model* m = nullptr;
    CHECK(pi_model_load(tiny_model().c_str(), nullptr, &m) == PI_OK);
    unsetenv("LLAMA_SPARSE_PRED_THRESHOLD");
    pi_log_set(nullptr, nullptr);
    pi_model_free(m);
    CHECK(warnings.load() >= 1);
}

TEST_CASE("two contexts on one model generate the same text in two threads") {
    loaded l;
    pi_context* c2 = nullptr;
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    REQUIRE(pi_context_create(l.model, &cp, &c2) == PI_OK);
    std::string a, b;
    std::thread t1([&] { a = generate_text(l.ctx, "Tell me a story", 8); });
    std::thread t2([&] { b = generate_text(c2, "Tell me a story", 8); });
    t1.join();
    t2.join();
    CHECK(a == b);
    pi_context_free(c2);
}

TEST_CASE("offloading to a second CPU instance keeps the greedy text and reports its placement") {
    std::string expected;
    {
        loaded cpu_only;
        expected = generate_text(cpu_only.ctx, "The capital of France", 8);
    }
    pi_model_params mp = pi_model_default_params();
    mp.offload_device = "cpu";
    mp.vram_budget = 32.0 * 1024 * 1024;
    mp.reset_gpu_index = 1;
    mp.kv_n_ctx = 128;
    pi_model* m = nullptr;
    REQUIRE(pi_model_load(tiny_model().c_str(), &mp, &m) == PI_OK);
    pi_model_info info;
    info.struct_size = sizeof(info);
    REQUIRE(pi_model_info_get(m, &info) == PI_OK);
    CHECK(std::string(info.offload_device).find("cpu") == 0);
    CHECK(info.offload_bytes > 0);
    CHECK(info.offload_bytes <= 32u * 1024 * 1024);
    CHECK(info.hot_neurons[0] > 0);
    CHECK(info.attn_on_device[0] == 1);
    CHECK(info.predictor_on_device[info.n_layer - 1] == 1);
    CHECK(info.output_on_device == 1);
    CHECK(info.kv_n_ctx_on_device == 128);
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    pi_context* c = nullptr;
    REQUIRE(pi_context_create(m, &cp, &c) == PI_OK);
    CHECK(generate_text(c, "The capital of France", 8) == expected);
    // The copies between the host and the device are counted; a prefix of the stats struct
    // (as an older caller's) is filled without them.
    pi_context_stats stats{};
    stats.struct_size = sizeof(stats);
    REQUIRE(pi_context_stats_get(c, &stats) == PI_OK);
    CHECK(stats.n_decode_tokens > 0);
    CHECK(stats.decode_bytes_to_device > 0);
    CHECK(stats.decode_bytes_to_host > 0);
    CHECK(stats.decode_downloads >= stats.n_decode_tokens); // the logits at least
    CHECK(stats.bytes_to_device >= stats.decode_bytes_to_device);
    CHECK(stats.bytes_to_host >= stats.decode_bytes_to_host);
    CHECK(stats.cpu_wait_seconds >= 0);
    CHECK(stats.device_wait_seconds >= 0);
    pi_context_stats old{};
    old.struct_size = offsetof(pi_context_stats, decode_bytes_to_device);
    old.decode_bytes_to_device = 7;
    REQUIRE(pi_context_stats_get(c, &old) == PI_OK);
    CHECK(old.decode_bytes == stats.decode_bytes);
    CHECK(old.decode_bytes_to_device == 7);
    pi_context_free(c);
    pi_model_free(m);

    std::FILE* index = std::fopen((tiny_model() + ".generated.gpuidx").c_str(), "rb");
    CHECK(index != nullptr);
    if (index) std::fclose(index);
}

TEST_CASE("bad offload parameters are rejected and the estimate reports a placement") {
    pi_model_params mp = pi_model_default_params();
    mp.offload_device = "tpu";
    mp.vram_budget = 1e6;
    pi_model* m = nullptr;
    CHECK(pi_model_load(tiny_model().c_str(), &mp, &m) == PI_ERR_INVALID_ARGUMENT);
    CHECK(std::string(pi_last_error()).find("tpu") != std::string::npos);
    mp.offload_device = "cpu";
    mp.vram_budget = -1;
    CHECK(pi_model_load(tiny_model().c_str(), &mp, &m) == PI_ERR_INVALID_ARGUMENT);

    mp = pi_model_default_params();
    mp.kv_n_ctx = -1;
    mp.vram_budget = 16.0 * 1024 * 1024;
    CHECK(pi_model_load(tiny_model().c_str(), &mp, &m) == PI_ERR_INVALID_ARGUMENT);
    CHECK(std::string(pi_last_error()).find("kv_n_ctx") != std::string::npos);
    mp.kv_n_ctx = 0;
    size_t len = 0;
    CHECK(pi_model_estimate_memory(tiny_model().c_str(), &mp, nullptr, 0, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    REQUIRE(len > 0);
    std::vector<char> report(len + 1);
    REQUIRE(pi_model_estimate_memory(tiny_model().c_str(), &mp, report.data(), report.size(),
                                     &len) == PI_OK);
    CHECK(std::string(report.data()).find("MiB") != std::string::npos);
}

TEST_CASE("the estimate plans for a named GPU backend this machine lacks, and says so") {
    pi_model_params mp = pi_model_default_params();
    mp.vram_budget = 16.0 * 1024 * 1024;
    for (const char* name : {"cuda", "hip"}) {
        CAPTURE(std::string(name));
        mp.offload_device = name;
        std::vector<char> report(1 << 16);
        size_t len = 0;
        REQUIRE(pi_model_estimate_memory(tiny_model().c_str(), &mp, report.data(), report.size(),
                                         &len) == PI_OK);
        const std::string text(report.data());
        CHECK(text.find("MiB") != std::string::npos);
        pi_model* m = nullptr;
        if (pi_model_load(tiny_model().c_str(), &mp, &m) == PI_OK) {
            pi_model_free(m); // this machine has the device: nothing to say about a missing one
        } else {
            CHECK(text.find("backend unavailable") != std::string::npos);
            CHECK(text.find("no offload device is usable") != std::string::npos);
        }
    }
}

TEST_CASE("without a GPU module, auto offloading falls back to the CPU") {
    pi_model_params mp = pi_model_default_params();
    mp.vram_budget = 1e9;
    pi_model* m = nullptr;
    REQUIRE(pi_model_load(tiny_model().c_str(), &mp, &m) == PI_OK);
    pi_model_info info;
    info.struct_size = sizeof(info);
    REQUIRE(pi_model_info_get(m, &info) == PI_OK);
    const std::string sys = pi_system_info();
    CHECK(sys.find("CUDA backend") != std::string::npos);
    CHECK(sys.find("HIP backend") != std::string::npos);
    if (sys.find("unavailable") != std::string::npos && sys.find("device:") == std::string::npos)
        CHECK(std::string(info.offload_device).empty());
    pi_model_free(m);
}
