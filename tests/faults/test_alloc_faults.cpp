// Every allocation of the C API's heavy operations failed in turn, once and from then on
// (docs/robustness.md): each failure is a clean PI_ERR_OUT_OF_MEMORY with a message, frees
// everything (the byte tally of alloc_counter.cpp returns to where it was; LeakSanitizer agrees
// under the asan preset), leaves no handle and no file behind and the objects it was given as
// they were, and the operation then succeeds with the result it has without faults.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "fault_fixture.hpp"
#include "powerinfer.h"
#include "support/test_support.hpp"

using namespace pi::faults;

namespace {

constexpr int n_generated = 4;

pi_model* load(int use_mmap) {
    pi_model_params p = pi_model_default_params();
    p.use_mmap = use_mmap;
    pi_model* m = nullptr;
    REQUIRE_MESSAGE(pi_model_load(tiny_model_path().c_str(), &p, &m) == PI_OK,
                    std::string(pi_last_error()));
    return m;
}

pi_context_params one_thread_context() {
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 16;
    cp.n_threads = 1;
    return cp;
}

// The tokens of a greedy generation, gathered without allocating.
struct tokens {
    std::array<pi_token, n_generated> ids{};
    int n = 0;
    bool operator==(const tokens& o) const { return n == o.n && ids == o.ids; }
};

int gather(const pi_token_event* e, void* user_data) {
    auto* t = static_cast<tokens*>(user_data);
    if (t->n < n_generated) t->ids[static_cast<size_t>(t->n++)] = e->token;
    return 1;
}

pi_status generate(pi_context* ctx, tokens& out) {
    out = tokens{};
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = n_generated;
    gp.temperature = 0.0f;
    gp.reuse_cache = 0;
    gp.on_token = &gather;
    gp.user_data = &out;
    return pi_generate(ctx, "The lighthouse", &gp, nullptr);
}

pi_model_info info_of(const pi_model* m) {
    pi_model_info info;
    info.struct_size = sizeof info;
    REQUIRE(pi_model_info_get(m, &info) == PI_OK);
    return info;
}

// A fault case for pi_model_load with these params: a failure leaves no model, a success the
// model `want` describes.
fault_case load_case(const pi_model_params& p, const pi_model_info& want, pi_model*& m) {
    return {{},
            [&p, &m] { return pi_model_load(tiny_model_path().c_str(), &p, &m); },
            [&m, want](pi_status st, bool) {
                if (st != PI_OK) {
                    CHECK(m == nullptr);
                    return;
                }
                const pi_model_info got = info_of(m);
                CHECK(got.n_params == want.n_params);
                CHECK(got.n_vocab == want.n_vocab);
                CHECK(got.offload_bytes == want.offload_bytes);
                CHECK(got.hot_neurons[0] == want.hot_neurons[0]);
                pi_model_free(m);
                m = nullptr;
            },
            {},
            {}};
}

} // namespace

TEST_CASE("the pi_*_params_init functions allocate nothing, so they cannot fail") {
    arm(1, true);
    pi_model_params mp;
    pi_context_params cp;
    pi_sampler_params sp;
    pi_generate_params gp;
    pi_synth_params yp;
    pi_quantize_params qp;
    const pi_status st[] = {
        pi_model_params_init(&mp, sizeof mp),   pi_context_params_init(&cp, sizeof cp),
        pi_sampler_params_init(&sp, sizeof sp), pi_generate_params_init(&gp, sizeof gp),
        pi_synth_params_init(&yp, sizeof yp),   pi_quantize_params_init(&qp, sizeof qp)};
    const uint64_t failed = disarm();
    CHECK(failed == 0);
    for (const pi_status s : st)
        CHECK(s == PI_OK);
    CHECK(sp.top_p == doctest::Approx(0.95f));
    CHECK(gp.top_p == doctest::Approx(0.95f));
}

TEST_CASE("pi_model_load fails cleanly at every allocation, mapped and read into memory") {
    for (const int use_mmap : {1, 0}) {
        CAPTURE(use_mmap);
        pi_model* reference = load(use_mmap);
        const pi_model_info want = info_of(reference);
        pi_model_free(reference);
        pi_model_params p = pi_model_default_params();
        p.use_mmap = use_mmap;
        pi_model* m = nullptr;
        fault_case c = load_case(p, want, m);
        // The mapping fails through the library's hook, the read buffer through operator new.
        c.expected_messages = {use_mmap ? "cannot map" : "bytes for"};
        const loop_stats s = for_both_plans(use_mmap ? "load, mapped" : "load, read", c);
        CHECK(s.runs > 100);
    }
}

TEST_CASE("pi_model_load with an offload device fails cleanly while planning and caching") {
    const std::string cache = tiny_model_path() + ".generated.gpuidx";
    pi_model_params p = pi_model_default_params();
    p.offload_device = "cpu"; // the hybrid path without a GPU: calibration, planner, GPU index
    p.vram_budget = 32.0 * 1024 * 1024;
    pi_model* reference = nullptr;
    std::filesystem::remove(cache);
    REQUIRE(pi_model_load(tiny_model_path().c_str(), &p, &reference) == PI_OK);
    const pi_model_info want = info_of(reference);
    pi_model_free(reference);
    REQUIRE(want.offload_bytes > 0);
    pi_model* m = nullptr;

    fault_case planning = load_case(p, want, m);
    planning.setup = [&] { std::filesystem::remove(cache); };
    for_both_plans("load with calibration and a new GPU index", planning);
    // The last run wrote the cache; with it the planner is skipped.
    REQUIRE(file_exists(cache));
    for_both_plans("load with a cached GPU index", load_case(p, want, m));
    std::filesystem::remove(cache);
}

TEST_CASE("pi_context_create, samplers and the tokenizer fail cleanly at every allocation") {
    pi_model* m = load(1);
    const pi_context_params cp = one_thread_context();
    pi_context* ctx = nullptr;
    for_both_plans("pi_context_create", {{},
                                         [&] { return pi_context_create(m, &cp, &ctx); },
                                         [&](pi_status st, bool) {
                                             if (st != PI_OK) {
                                                 CHECK(ctx == nullptr);
                                                 return;
                                             }
                                             CHECK(pi_context_n_ctx(ctx) == 64);
                                             pi_context_free(ctx);
                                             ctx = nullptr;
                                         },
                                         {},
                                         {}});

    // Not a JSON-schema sampler: nlohmann/json's destructor allocates (a stack to free nested
    // values without recursion) and terminates the process when that allocation fails
    // (nlohmann/json issues 4653 and 5135; docs/robustness.md, "Known limits").
    {
        pi_sampler_params sp = pi_sampler_default_params();
        sp.grammar = "root ::= \"The\" [ a-z]+ \".\"";
        pi_sampler* sampler = nullptr;
        for_both_plans("a grammar sampler",
                       {{},
                        [&] { return pi_sampler_create_for_model(m, &sp, &sampler); },
                        [&](pi_status st, bool) {
                            if (st != PI_OK) {
                                CHECK(sampler == nullptr);
                                return;
                            }
                            pi_sampler_free(sampler);
                            sampler = nullptr;
                        },
                        {},
                        {}});
    }

    const char text[] = "The lighthouse keeper climbed the stairs.";
    std::array<pi_token, 64> ids{};
    size_t n = 0;
    REQUIRE(pi_tokenize(m, text, sizeof text - 1, 1, ids.data(), ids.size(), &n) == PI_OK);
    const size_t want_n = n;
    const std::array<pi_token, 64> want_ids = ids;
    for_both_plans(
        "pi_tokenize",
        {{},
         [&] { return pi_tokenize(m, text, sizeof text - 1, 1, ids.data(), ids.size(), &n); },
         [&](pi_status st, bool) {
             if (st == PI_OK) CHECK((n == want_n && ids == want_ids));
         },
         {},
         {}});
    std::array<char, 256> out{};
    size_t len = 0;
    for_both_plans(
        "pi_detokenize",
        {{},
         [&] { return pi_detokenize(m, want_ids.data(), want_n, out.data(), out.size(), &len); },
         [&](pi_status st, bool) {
             if (st == PI_OK) CHECK(std::strstr(out.data(), "stairs"));
         },
         {},
         {}});
    const pi_chat_message chat[] = {{"system", "Be brief."}, {"user", "Hello"}};
    for_both_plans("pi_chat_apply_template", {{},
                                              [&] {
                                                  return pi_chat_apply_template(m, "chatml", chat,
                                                                                2, 1, out.data(),
                                                                                out.size(), &len);
                                              },
                                              [&](pi_status st, bool) {
                                                  if (st == PI_OK)
                                                      CHECK(std::strstr(out.data(), "Hello"));
                                              },
                                              {},
                                              {}});
    pi_model_free(m);
}

TEST_CASE(
    "pi_generate fails cleanly at every allocation and the context then generates as before") {
    pi_model* m = load(1);
    const pi_context_params cp = one_thread_context();
    pi_context* ctx = nullptr;
    REQUIRE(pi_context_create(m, &cp, &ctx) == PI_OK);
    tokens want;
    REQUIRE(generate(ctx, want) == PI_OK);
    REQUIRE(want.n == n_generated);
    pi_context_free(ctx);
    ctx = nullptr;

    tokens got;
    for_both_plans("pi_generate", {[&] { REQUIRE(pi_context_create(m, &cp, &ctx) == PI_OK); },
                                   [&] { return generate(ctx, got); },
                                   [&](pi_status st, bool) {
                                       if (st != PI_OK) {
                                           // The context survives: the same generation, unarmed,
                                           // succeeds with the same tokens.
                                           tokens again;
                                           CHECK(generate(ctx, again) == PI_OK);
                                           CHECK(again == want);
                                       } else {
                                           CHECK(got == want);
                                       }
                                       pi_context_free(ctx);
                                       ctx = nullptr;
                                   },
                                   {},
                                   {}});
    pi_model_free(m);
}

TEST_CASE("pi_model_quantize and pi_synth_model_write fail cleanly and leave no file") {
    const std::string dir = memory_scratch_dir("faults_quantize");
    const std::string out = dir + "/tiny.q4_0.gguf";
    pi_quantize_params qp = pi_quantize_default_params();
    qp.type = "Q4_0";
    qp.n_threads = 1;
    REQUIRE_MESSAGE(pi_model_quantize(tiny_model_path().c_str(), out.c_str(), &qp) == PI_OK,
                    std::string(pi_last_error()));
    const std::vector<uint8_t> want = file_bytes(out);
    std::filesystem::remove(out);
    const std::vector<uint8_t> input = file_bytes(tiny_model_path());
    const auto no_file_or_the_file = [&](const std::vector<uint8_t>& expected) {
        return [&, expected](pi_status st, bool) {
            if (st != PI_OK) {
                CHECK(folder_listing(dir).empty()); // neither the output nor a temporary file
                return;
            }
            CHECK(file_bytes(out) == expected);
            std::filesystem::remove(out);
        };
    };
    for_both_plans("pi_model_quantize",
                   {{},
                    [&] { return pi_model_quantize(tiny_model_path().c_str(), out.c_str(), &qp); },
                    no_file_or_the_file(want),
                    {},
                    {}});
    CHECK(file_bytes(tiny_model_path()) == input);

    pi_synth_params sp = pi_synth_default_params();
    sp.n_embd = 16;
    sp.n_layer = 1;
    sp.n_head = 2;
    sp.n_head_kv = 1;
    sp.n_ff = 32;
    sp.n_ctx_train = 64;
    sp.seed = 5;
    sp.vocab_path = tiny_vocab_path().c_str();
    REQUIRE(pi_synth_model_write(&sp, out.c_str()) == PI_OK);
    const std::vector<uint8_t> synth = file_bytes(out);
    std::filesystem::remove(out);
    // Its run makes 3799 allocations, most of them the vocabulary's; every fifth is failed, which
    // the quantization above (every one failed) shares the writer with.
    for_both_plans("pi_synth_model_write", {{},
                                            [&] { return pi_synth_model_write(&sp, out.c_str()); },
                                            no_file_or_the_file(synth),
                                            {},
                                            {},
                                            5});
}

TEST_CASE("saving and loading state, to memory and to files, fail cleanly at every allocation") {
    const std::string dir = memory_scratch_dir("faults_state");
    const std::string path = dir + "/state.bin";
    pi_model* m = load(1);
    const pi_context_params cp = one_thread_context();
    pi_context* ctx = nullptr;
    REQUIRE(pi_context_create(m, &cp, &ctx) == PI_OK);
    tokens first;
    REQUIRE(generate(ctx, first) == PI_OK);
    REQUIRE(pi_context_state_save_file(ctx, -1, nullptr, path.c_str()) == PI_OK);
    const std::vector<uint8_t> saved = file_bytes(path);
    const std::vector<uint8_t> old_content = {'o', 'l', 'd'};
    const auto put_old = [&] {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        REQUIRE(f != nullptr);
        std::fwrite(old_content.data(), 1, old_content.size(), f);
        std::fclose(f);
    };

    for_both_plans("pi_context_state_save_file",
                   {put_old,
                    [&] { return pi_context_state_save_file(ctx, -1, nullptr, path.c_str()); },
                    [&](pi_status st, bool) {
                        CHECK(folder_listing(dir) == std::vector<std::string>{"state.bin"});
                        CHECK(file_bytes(path) == (st == PI_OK ? saved : old_content));
                    },
                    {},
                    {}});
    REQUIRE(file_bytes(path) == saved);

    std::vector<uint8_t> buf(saved.size() + 64);
    size_t len = 0;
    for_both_plans(
        "pi_context_state_save",
        {{},
         [&] { return pi_context_state_save(ctx, -1, nullptr, buf.data(), buf.size(), &len); },
         [&](pi_status st, bool) {
             if (st == PI_OK)
                 CHECK((len == saved.size() && std::memcmp(buf.data(), saved.data(), len) == 0));
         },
         {},
         {}});

    pi_context* target = nullptr;
    const int32_t n_past = pi_context_n_past(ctx);
    const auto fresh_target = [&] { REQUIRE(pi_context_create(m, &cp, &target) == PI_OK); };
    const auto loaded_or_untouched = [&](pi_status st, bool) {
        // A failed load leaves the context as it was: empty, and it still generates.
        CHECK(pi_context_n_past(target) == (st == PI_OK ? n_past : 0));
        if (st != PI_OK) {
            tokens again;
            CHECK(generate(target, again) == PI_OK);
            CHECK(again == first);
        }
        pi_context_free(target);
        target = nullptr;
    };
    for_both_plans("pi_context_state_load_file",
                   {fresh_target,
                    [&] { return pi_context_state_load_file(target, -1, nullptr, path.c_str()); },
                    loaded_or_untouched,
                    {},
                    {}});
    for_both_plans(
        "pi_context_state_load",
        {fresh_target,
         [&] { return pi_context_state_load(target, -1, nullptr, saved.data(), saved.size()); },
         loaded_or_untouched,
         {},
         {}});
    pi_context_free(ctx);
    pi_model_free(m);
}
