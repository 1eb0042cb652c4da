// The conversation functions of the C API: multi-sequence batches, per-sequence cache edits,
// saved state and the generation that keeps its cache, each with its bad input.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "api_test_data.hpp"
#include "powerinfer.h"

namespace {

const std::string& conversation_model(uint64_t seed = 5) {
    static std::string paths[2];
    std::string& path = paths[seed == 5 ? 0 : 1];
    if (path.empty()) {
        path = std::string(PI_TEST_BINARY_DIR) + "/conversation_" + std::to_string(seed) + ".gguf";
        write_tiny_model(path, seed);
    }
    return path;
}

struct session {
    pi_model* model = nullptr;
    pi_context* ctx = nullptr;
    explicit session(int32_t n_seq = 2, int32_t n_ctx = 128, uint64_t seed = 5) {
        REQUIRE(pi_model_load(conversation_model(seed).c_str(), nullptr, &model) == PI_OK);
        pi_context_params cp = pi_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_threads = 1;
        cp.n_seq_max = n_seq;
        REQUIRE(pi_context_create(model, &cp, &ctx) == PI_OK);
    }
    ~session() {
        pi_context_free(ctx);
        pi_model_free(model);
    }
    session(const session&) = delete;
    session& operator=(const session&) = delete;
};

const std::vector<pi_token> prompt = {1, 1064, 261, 2096, 395, 3588};

pi_status decode(pi_context* ctx, const std::vector<pi_token>& tokens, pi_seq_id seq) {
    const std::vector<pi_seq_id> seqs(tokens.size(), seq);
    pi_seq_batch b{};
    b.struct_size = sizeof(b);
    b.n_tokens = static_cast<int32_t>(tokens.size());
    b.tokens = tokens.data();
    b.seq_id = seqs.data();
    return pi_context_decode(ctx, &b);
}

std::vector<float> logits_of(pi_context* ctx, int32_t i, int32_t n_vocab) {
    const float* l = pi_get_logits(ctx, i);
    REQUIRE(l != nullptr);
    return {l, l + n_vocab};
}

bool contains(const char* text, const char* part) {
    return std::string(text).find(part) != std::string::npos;
}

struct greedy_run {
    std::string text;
    pi_generate_result result{};
    pi_status status = PI_OK;
};

greedy_run generate(pi_context* ctx, const char* prompt_text, int max_tokens,
                    int32_t context_shift = 0) {
    greedy_run run;
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = max_tokens;
    gp.temperature = 0.0f;
    gp.context_shift = context_shift;
    gp.callback = [](const char* t, size_t n, void* u) {
        static_cast<std::string*>(u)->append(t, n);
        return 1;
    };
    gp.user_data = &run.text;
    run.result.struct_size = sizeof(run.result);
    run.status = pi_generate(ctx, prompt_text, &gp, &run.result);
    return run;
}

} // namespace

TEST_CASE("a two-sequence batch returns each sequence's last logits") {
    session s;
    const int32_t nv = pi_n_vocab(s.model);
    std::vector<pi_token> tokens = prompt;
    tokens.insert(tokens.end(), prompt.begin(), prompt.begin() + 3);
    std::vector<pi_seq_id> seqs(prompt.size(), 0);
    seqs.insert(seqs.end(), 3, 1);
    pi_seq_batch b{};
    b.struct_size = sizeof(b);
    b.n_tokens = static_cast<int32_t>(tokens.size());
    b.tokens = tokens.data();
    b.seq_id = seqs.data();
    REQUIRE(pi_context_decode(s.ctx, &b) == PI_OK);
    CHECK(pi_get_logits(s.ctx, static_cast<int32_t>(prompt.size()) - 1) != nullptr);
    CHECK(pi_get_logits(s.ctx, static_cast<int32_t>(tokens.size()) - 1) != nullptr);
    CHECK(pi_get_logits(s.ctx, 0) == nullptr);
    CHECK(pi_kv_seq_pos_max(s.ctx, 0) == 5);
    CHECK(pi_kv_seq_pos_max(s.ctx, 1) == 2);
    CHECK(pi_kv_n_used_cells(s.ctx) == 9);
    CHECK(pi_context_n_seq_max(s.ctx) == 2);
    CHECK(pi_context_n_past(s.ctx) == 6);

    // Sequence 1 decoded alone to the same length gives what the batch gave it.
    session alone(1);
    REQUIRE(decode(alone.ctx, {prompt.begin(), prompt.begin() + 3}, 0) == PI_OK);
    const std::vector<float> a = logits_of(alone.ctx, -1, nv);
    const std::vector<float> m = logits_of(s.ctx, static_cast<int32_t>(tokens.size()) - 1, nv);
    for (int32_t i = 0; i < nv; i += 97)
        CHECK(m[static_cast<size_t>(i)] ==
              doctest::Approx(a[static_cast<size_t>(i)]).epsilon(1e-4));
}

TEST_CASE("the per-sequence cache edits and their bad input") {
    session s(3);
    REQUIRE(decode(s.ctx, prompt, 0) == PI_OK);
    CHECK(pi_kv_seq_copy(s.ctx, 0, 1, 0, 4) == PI_OK);
    CHECK(pi_kv_seq_pos_max(s.ctx, 1) == 3);
    CHECK(pi_kv_n_used_cells(s.ctx) == 6);
    CHECK(pi_kv_seq_remove(s.ctx, 0, 5, -1) == PI_OK);
    CHECK(pi_kv_seq_pos_max(s.ctx, 0) == 4);
    CHECK(pi_kv_seq_shift(s.ctx, 1, 0, -1, 10) == PI_OK);
    CHECK(pi_kv_seq_pos_min(s.ctx, 1) == 10);
    CHECK(pi_kv_seq_keep(s.ctx, 1) == PI_OK);
    CHECK(pi_kv_seq_pos_max(s.ctx, 0) == -1);
    CHECK(pi_kv_seq_remove(s.ctx, -1, 0, -1) == PI_OK);
    CHECK(pi_kv_n_used_cells(s.ctx) == 0);

    CHECK(pi_kv_seq_remove(nullptr, 0, 0, -1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_remove(s.ctx, 3, 0, -1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(contains(pi_last_error(), "n_seq_max = 3"));
    CHECK(pi_kv_seq_remove(s.ctx, -2, 0, -1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_copy(nullptr, 0, 1, 0, -1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_copy(s.ctx, 0, 9, 0, -1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_copy(s.ctx, -1, 1, 0, -1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_keep(nullptr, 0) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_keep(s.ctx, 3) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_shift(nullptr, 0, 0, -1, 1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_shift(s.ctx, 4, 0, -1, 1) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_kv_seq_pos_min(nullptr, 0) == -1);
    CHECK(pi_kv_seq_pos_max(s.ctx, 17) == -1);
    CHECK(pi_kv_n_used_cells(nullptr) == -1);
    CHECK(pi_context_n_seq_max(nullptr) == 0);
}

TEST_CASE("pi_context_decode refuses bad batches and a full cache without changing it") {
    session s(2, 8);
    pi_seq_batch b{};
    CHECK(pi_context_decode(nullptr, &b) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_decode(s.ctx, nullptr) == PI_ERR_INVALID_ARGUMENT);
    b.struct_size = 4;
    CHECK(pi_context_decode(s.ctx, &b) == PI_ERR_INVALID_ARGUMENT);
    CHECK(contains(pi_last_error(), "struct_size"));
    b.struct_size = sizeof(b);
    CHECK(pi_context_decode(s.ctx, &b) == PI_ERR_INVALID_ARGUMENT); // no tokens
    const pi_token one[1] = {1};
    b.tokens = one;
    b.n_tokens = 0;
    CHECK(pi_context_decode(s.ctx, &b) == PI_ERR_INVALID_ARGUMENT);
    b.n_tokens = 1;
    const pi_seq_id bad_seq[1] = {2};
    b.seq_id = bad_seq;
    CHECK(pi_context_decode(s.ctx, &b) == PI_ERR_INVALID_ARGUMENT);
    CHECK(contains(pi_last_error(), "sequence id 2"));

    REQUIRE(decode(s.ctx, prompt, 0) == PI_OK);
    CHECK(decode(s.ctx, {1, 395, 740}, 1) == PI_ERR_CONTEXT_FULL);
    CHECK(contains(pi_last_error(), "no free cell"));
    CHECK(pi_kv_n_used_cells(s.ctx) == static_cast<int32_t>(prompt.size()));
    CHECK(pi_kv_seq_pos_max(s.ctx, 1) == -1);
}

TEST_CASE("a saved state restores in memory and from a file, and continues identically") {
    session a;
    const int32_t nv = pi_n_vocab(a.model);
    REQUIRE(decode(a.ctx, prompt, 0) == PI_OK);
    pi_sampler_params sp = pi_sampler_default_params();
    sp.seed = 11;
    pi_sampler* sa = nullptr;
    REQUIRE(pi_sampler_create(&sp, &sa) == PI_OK);
    pi_token drawn = 0;
    REQUIRE(pi_sample(sa, pi_get_logits(a.ctx, -1), nv, &drawn) == PI_OK);

    size_t size = 0;
    REQUIRE(pi_context_state_save(a.ctx, -1, sa, nullptr, 0, &size) == PI_OK);
    REQUIRE(size > 0);
    std::vector<uint8_t> blob(size);
    size_t written = 0;
    CHECK(pi_context_state_save(a.ctx, -1, sa, blob.data(), 3, &written) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(written == size);
    REQUIRE(pi_context_state_save(a.ctx, -1, sa, blob.data(), blob.size(), &written) == PI_OK);
    const std::string file = std::string(PI_TEST_BINARY_DIR) + "/conversation.state";
    REQUIRE(pi_context_state_save_file(a.ctx, -1, sa, file.c_str()) == PI_OK);

    for (int from_file = 0; from_file < 2; ++from_file) {
        session b;
        pi_sampler* sb = nullptr;
        pi_sampler_params other = sp;
        other.seed = 99;
        REQUIRE(pi_sampler_create(&other, &sb) == PI_OK);
        if (from_file)
            REQUIRE(pi_context_state_load_file(b.ctx, -1, sb, file.c_str()) == PI_OK);
        else
            REQUIRE(pi_context_state_load(b.ctx, -1, sb, blob.data(), blob.size()) == PI_OK);
        CHECK(logits_of(b.ctx, -1, nv) == logits_of(a.ctx, -1, nv));
        // The same next tokens from both: the cache, the logits and the sampler's RNG came back.
        session again;
        pi_sampler* sc = nullptr;
        REQUIRE(pi_sampler_create(&sp, &sc) == PI_OK);
        REQUIRE(pi_context_state_load(again.ctx, -1, sc, blob.data(), blob.size()) == PI_OK);
        for (int step = 0; step < 4; ++step) {
            pi_token tb = 0, tc = 0;
            REQUIRE(pi_sample(sb, pi_get_logits(b.ctx, -1), nv, &tb) == PI_OK);
            REQUIRE(pi_sample(sc, pi_get_logits(again.ctx, -1), nv, &tc) == PI_OK);
            CHECK(tb == tc);
            REQUIRE(decode(b.ctx, {tb}, 0) == PI_OK);
            REQUIRE(decode(again.ctx, {tc}, 0) == PI_OK);
            CHECK(logits_of(b.ctx, -1, nv) == logits_of(again.ctx, -1, nv));
        }
        pi_sampler_free(sc);
        pi_sampler_free(sb);
    }
    pi_sampler_free(sa);
    std::remove(file.c_str());
}

TEST_CASE("a wrong state is PI_ERR_FORMAT with the reason, the context untouched") {
    session a;
    REQUIRE(decode(a.ctx, prompt, 0) == PI_OK);
    size_t size = 0;
    REQUIRE(pi_context_state_save(a.ctx, -1, nullptr, nullptr, 0, &size) == PI_OK);
    std::vector<uint8_t> blob(size);
    REQUIRE(pi_context_state_save(a.ctx, -1, nullptr, blob.data(), blob.size(), &size) == PI_OK);

    session b;
    REQUIRE(decode(b.ctx, {1, 395}, 1) == PI_OK);
    const auto untouched = [&] {
        CHECK(pi_kv_seq_pos_max(b.ctx, 1) == 1);
        CHECK(pi_kv_seq_pos_max(b.ctx, 0) == -1);
    };
    CHECK(pi_context_state_load(b.ctx, -1, nullptr, blob.data(), blob.size() - 7) == PI_ERR_FORMAT);
    CHECK(contains(pi_last_error(), "truncated"));
    untouched();
    std::vector<uint8_t> garbage(blob.size(), 0x5a);
    CHECK(pi_context_state_load(b.ctx, -1, nullptr, garbage.data(), garbage.size()) ==
          PI_ERR_FORMAT);
    untouched();

    session other(2, 128, 8);
    CHECK(pi_context_state_load(other.ctx, -1, nullptr, blob.data(), blob.size()) == PI_ERR_FORMAT);
    CHECK(contains(pi_last_error(), "another model"));

    // A sampler asked for but not saved, and the arguments.
    pi_sampler* smp = nullptr;
    REQUIRE(pi_sampler_create(nullptr, &smp) == PI_OK);
    CHECK(pi_context_state_load(b.ctx, -1, smp, blob.data(), blob.size()) == PI_ERR_FORMAT);
    CHECK(contains(pi_last_error(), "no sampler state"));
    untouched();
    pi_sampler_free(smp);
    CHECK(pi_context_state_load(nullptr, -1, nullptr, blob.data(), blob.size()) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_load(b.ctx, -1, nullptr, nullptr, 4) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_load(b.ctx, 5, nullptr, blob.data(), blob.size()) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_save(nullptr, -1, nullptr, nullptr, 0, &size) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_save(b.ctx, -1, nullptr, nullptr, 0, nullptr) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_save(b.ctx, -1, nullptr, nullptr, 8, &size) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_save(b.ctx, 2, nullptr, nullptr, 0, &size) == PI_ERR_INVALID_ARGUMENT);

    // Files: missing, truncated, unwritable; a failed save leaves no file behind.
    const std::string dir = std::string(PI_TEST_BINARY_DIR) + "/state_files";
    std::filesystem::create_directories(dir);
    CHECK(pi_context_state_load_file(b.ctx, -1, nullptr, (dir + "/missing").c_str()) == PI_ERR_IO);
    const std::string cut = dir + "/cut.state";
    std::ofstream(cut, std::ios::binary)
        .write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(size / 2));
    CHECK(pi_context_state_load_file(b.ctx, -1, nullptr, cut.c_str()) == PI_ERR_FORMAT);
    untouched();
    CHECK(pi_context_state_save_file(b.ctx, -1, nullptr, (dir + "/no/such/dir/x").c_str()) ==
          PI_ERR_IO);
    CHECK(pi_context_state_save_file(b.ctx, -1, nullptr, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_load_file(b.ctx, -1, nullptr, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_context_state_save_file(nullptr, -1, nullptr, cut.c_str()) == PI_ERR_INVALID_ARGUMENT);
    size_t leftovers = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        leftovers += e.path().string().find(".tmp.") != std::string::npos;
    CHECK(leftovers == 0);
}

TEST_CASE("pi_generate keeps the cache: the next turn decodes only its new tokens") {
    session s(1, 256);
    greedy_run first = generate(s.ctx, "In the beginning God created", 6);
    REQUIRE(first.status == PI_OK);
    CHECK(first.result.n_cached_tokens == 0);
    pi_context_stats before{};
    before.struct_size = sizeof(before);
    REQUIRE(pi_context_stats_get(s.ctx, &before) == PI_OK);
    const std::string next_turn = "In the beginning God created" + first.text + " and the earth";
    greedy_run second = generate(s.ctx, next_turn.c_str(), 6);
    REQUIRE(second.status == PI_OK);
    CHECK(second.result.n_cached_tokens > first.result.n_prompt_tokens);
    pi_context_stats after{};
    after.struct_size = sizeof(after);
    REQUIRE(pi_context_stats_get(s.ctx, &after) == PI_OK);
    CHECK(after.n_prompt_tokens - before.n_prompt_tokens ==
          static_cast<uint64_t>(second.result.n_prompt_tokens - second.result.n_cached_tokens));

    // The same prompt on a fresh context generates the same text.
    session fresh(1, 256);
    CHECK(generate(fresh.ctx, next_turn.c_str(), 6).text == second.text);
}

TEST_CASE("pi_generate shifts a full context on request and reports each token") {
    session s(1, 24);
    greedy_run stopped = generate(s.ctx, "In the beginning", 40);
    CHECK(stopped.result.stop_reason == PI_STOP_CONTEXT_FULL);
    pi_kv_seq_remove(s.ctx, -1, 0, -1);
    greedy_run shifted = generate(s.ctx, "In the beginning", 40, 1);
    CHECK(shifted.status == PI_OK);
    CHECK(shifted.result.stop_reason == PI_STOP_MAX_TOKENS);
    CHECK(shifted.result.n_context_shifts >= 1);

    struct seen {
        std::string text, event_text;
        int events = 0;
        bool ok = true;
    } st;
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = 5;
    gp.temperature = 0.0f;
    gp.reuse_cache = 0;
    gp.n_probs = 4;
    gp.callback = [](const char* t, size_t n, void* u) {
        static_cast<seen*>(u)->text.append(t, n);
        return 1;
    };
    gp.on_token = [](const pi_token_event* e, void* u) {
        auto* x = static_cast<seen*>(u);
        ++x->events;
        x->event_text.append(e->text, e->len);
        x->ok &= e->struct_size == sizeof(pi_token_event) && e->n_top == 4 &&
                 e->top_tokens[0] == e->token && e->logprob <= 0.0f &&
                 e->top_logprobs[0] >= e->top_logprobs[3];
        return 1;
    };
    gp.user_data = &st;
    pi_generate_result r{};
    r.struct_size = sizeof(r);
    REQUIRE(pi_generate(s.ctx, "In the beginning", &gp, &r) == PI_OK);
    CHECK(st.events == r.n_generated_tokens);
    CHECK(st.event_text == st.text);
    CHECK(st.ok);

    // Returning 0 from on_token stops like the text callback does.
    gp.on_token = [](const pi_token_event*, void*) { return 0; };
    CHECK(pi_generate(s.ctx, "In the beginning", &gp, &r) == PI_STATUS_CANCELLED);
    CHECK(r.stop_reason == PI_STOP_CALLBACK);
    gp.on_token = nullptr;
    gp.n_probs = 99;
    CHECK(pi_generate(s.ctx, "In the beginning", &gp, &r) == PI_ERR_INVALID_ARGUMENT);
    gp.n_probs = 0;
    gp.seq_id = 1;
    CHECK(pi_generate(s.ctx, "In the beginning", &gp, &r) == PI_ERR_INVALID_ARGUMENT);
    gp.seq_id = 0;
    gp.n_keep = -1;
    CHECK(pi_generate(s.ctx, "In the beginning", &gp, &r) == PI_ERR_INVALID_ARGUMENT);
}

TEST_CASE("output structs of an older, smaller size get only their prefix") {
    session s;
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = 2;
    gp.temperature = 0.0f;
    struct {
        pi_generate_result r;
        char guard[64];
    } small{};
    std::memset(&small, 0x7e, sizeof small);
    // 0.1's pi_generate_result ended with stop_reason.
    small.r.struct_size = offsetof(pi_generate_result, n_cached_tokens);
    REQUIRE(pi_generate(s.ctx, "In the beginning", &gp, &small.r) == PI_OK);
    CHECK(small.r.n_generated_tokens == 2);
    CHECK(small.r.struct_size == offsetof(pi_generate_result, n_cached_tokens));
    unsigned char tail[sizeof(pi_generate_result) - offsetof(pi_generate_result, n_cached_tokens)];
    std::memcpy(tail,
                reinterpret_cast<const unsigned char*>(&small.r) +
                    offsetof(pi_generate_result, n_cached_tokens),
                sizeof tail);
    for (unsigned char c : tail)
        CHECK(c == 0x7e);

    pi_context_stats stats;
    std::memset(&stats, 0x7e, sizeof stats);
    stats.struct_size = offsetof(pi_context_stats, decode_seconds);
    REQUIRE(pi_context_stats_get(s.ctx, &stats) == PI_OK);
    CHECK(stats.n_prompt_tokens > 0);
    const auto* raw = reinterpret_cast<const unsigned char*>(&stats.decode_seconds);
    CHECK(raw[0] == 0x7e);
    stats.struct_size = 2;
    CHECK(pi_context_stats_get(s.ctx, &stats) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_version_number() == PI_VERSION_NUMBER);
}

TEST_CASE("pi_generate under a JSON schema always produces text of that schema") {
    session s(1, 256);
    pi_sampler_params sp = pi_sampler_default_params();
    sp.json_schema = R"({"type": "object", "properties": {"n": {"type": "integer"},
                         "ok": {"type": "boolean"}}, "required": ["n", "ok"]})";
    const std::regex shape(R"(\s*\{\s*"n"\s*:\s*-?[0-9]+\s*,\s*"ok"\s*:\s*(true|false)\s*\}\s*)");
    for (uint32_t seed = 1; seed <= 4; ++seed) {
        sp.seed = seed;
        std::string text;
        pi_generate_params gp = pi_generate_default_params();
        gp.max_tokens = 200;
        gp.sampler_params = &sp;
        gp.reuse_cache = 0;
        gp.callback = [](const char* t, size_t n, void* u) {
            static_cast<std::string*>(u)->append(t, n);
            return 1;
        };
        gp.user_data = &text;
        pi_generate_result r{};
        r.struct_size = sizeof(r);
        REQUIRE(pi_generate(s.ctx, "The answer as JSON:", &gp, &r) == PI_OK);
        CHECK(r.stop_reason == PI_STOP_EOS);
        CHECK_MESSAGE(std::regex_match(text, shape), text);
    }
    sp.json_schema = nullptr;
    sp.grammar = "root ::= \"a";
    pi_generate_params gp = pi_generate_default_params();
    gp.sampler_params = &sp;
    CHECK(pi_generate(s.ctx, "x", &gp, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(contains(pi_last_error(), "line 1"));
}
