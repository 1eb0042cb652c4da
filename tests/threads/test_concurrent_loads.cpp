// Models loaded and freed from several threads at once, different files and the same file: a
// load shares nothing but read-only files, and every loaded copy computes the same logits.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "threads_support.hpp"

using namespace threads_test;

namespace {

// The first greedy steps of a short prompt, on a model loaded with `params`; an empty run when
// loading fails. Asserts nothing, so it may run on any thread.
greedy_run load_and_decode(const std::string& path, const pi_model_params& params) {
    pi_model* model = nullptr;
    if (pi_model_load(path.c_str(), &params, &model) != PI_OK) return {};
    greedy_run run;
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    pi_context* ctx = nullptr;
    const std::vector<pi_token> prompt{pi_token_bos(model), 100, 200, 300};
    if (pi_context_create(model, &cp, &ctx) == PI_OK) run = greedy_decode(model, ctx, prompt, 3);
    pi_context_free(ctx);
    pi_model_free(model);
    return run;
}

pi_model_params load_params(bool use_mmap) {
    pi_model_params p = pi_model_default_params();
    p.use_mmap = use_mmap ? 1 : 0;
    return p;
}

} // namespace

TEST_CASE("different models and the same model load, decode and free in parallel threads") {
    const std::array<std::string, 2> files{tiny_model(21), tiny_model(22)};
    std::array<greedy_run, 2> reference;
    for (size_t f = 0; f < files.size(); ++f) {
        reference[f] = load_and_decode(files[f], load_params(true));
        REQUIRE(reference[f].tokens.size() == 3);
    }
    REQUIRE(reference[0].logits != reference[1].logits);

    // Thread t loads file t % 2, so two threads share each file; mapped and read loads alternate.
    constexpr int n_threads = 4;
    constexpr int rounds = 3;
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < n_threads; ++t)
        threads.emplace_back([&, t] {
            const size_t f = static_cast<size_t>(t % 2);
            for (int r = 0; r < rounds; ++r)
                if (load_and_decode(files[f], load_params((t + r) % 2 == 0)) != reference[f])
                    ++mismatches;
        });
    for (std::thread& t : threads)
        t.join();
    CHECK(mismatches == 0);
}

TEST_CASE("one model file is loaded by several threads while another thread frees its copy") {
    const std::string path = tiny_model(23);
    const greedy_run reference = load_and_decode(path, load_params(true));
    REQUIRE(reference.tokens.size() == 3);
    // A copy freed while the others load: the copies share the file, not their memory.
    pi_model* early = nullptr;
    REQUIRE(pi_model_load(path.c_str(), nullptr, &early) == PI_OK);
    std::vector<greedy_run> runs(3);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < runs.size(); ++i)
        threads.emplace_back([&, i] { runs[i] = load_and_decode(path, load_params(true)); });
    threads.emplace_back([&] { pi_model_free(early); });
    for (std::thread& t : threads)
        t.join();
    for (const greedy_run& run : runs)
        CHECK(run == reference);
}

TEST_CASE("synthetic models are written from several threads at once") {
    // The generator and the GGUF writer share nothing between calls: each file comes out as a
    // single-threaded write makes it.
    const std::string dir = std::string(PI_TEST_BINARY_DIR);
    const std::string serial = dir + "/threads_serial_31.gguf";
    write_tiny_model(serial, 31);
    const greedy_run reference = load_and_decode(serial, load_params(true));
    REQUIRE(reference.tokens.size() == 3);
    std::vector<std::string> paths;
    for (int i = 0; i < 3; ++i)
        paths.push_back(dir + "/threads_parallel_31_" + std::to_string(i) + ".gguf");
    std::vector<pi_status> written(paths.size(), PI_ERR_INTERNAL);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < paths.size(); ++i)
        threads.emplace_back([&, i] {
            const pi_synth_params p = tiny_model_params(31);
            written[i] = pi_synth_model_write(&p, paths[i].c_str());
        });
    for (std::thread& t : threads)
        t.join();
    for (size_t i = 0; i < paths.size(); ++i) {
        CHECK(written[i] == PI_OK);
        CHECK(load_and_decode(paths[i], load_params(true)) == reference);
    }
}
