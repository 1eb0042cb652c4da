#include "fault_fixture.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <variant>

#include <unistd.h>

#include "alloc_counter.hpp"
#include "gguf/gguf.hpp"
#include "support/test_support.hpp"

namespace pi::faults {

namespace {

constexpr size_t tiny_vocab_tokens = 320;

const std::string& scratch() {
    static const std::string dir = [] {
        install_library_hook();
        return test::scratch_dir("faults_models");
    }();
    return dir;
}

void write_tiny_vocab(const std::string& path) {
    const auto full = gguf::file::open(test::fixture_vocab_path());
    const size_t n_full = full->get_string_array("tokenizer.ggml.tokens").size();
    gguf::writer w(false);
    for (auto [key, v] : full->metadata()) {
        if (auto* arr = std::get_if<gguf::array_value>(&v.data); arr && arr->size() == n_full)
            *arr = arr->first(tiny_vocab_tokens);
        w.set(key, std::move(v));
    }
    w.write(path);
}

} // namespace

const std::string& tiny_vocab_path() {
    static const std::string path = [] {
        const std::string p = scratch() + "/tiny.vocab.gguf";
        write_tiny_vocab(p);
        return p;
    }();
    return path;
}

const std::string& tiny_model_path() {
    static const std::string path = [] {
        const std::string p = scratch() + "/tiny.gguf";
        pi_synth_params s = pi_synth_default_params();
        s.n_embd = 32;
        s.n_layer = 2;
        s.n_head = 2;
        s.n_head_kv = 1;
        s.n_ff = 64;
        s.n_ctx_train = 128;
        s.f16 = 1;
        s.predictor_rank = 32; // fc2 rows split into Q4_0 blocks
        s.seed = 11;
        s.vocab_path = tiny_vocab_path().c_str();
        REQUIRE_MESSAGE(pi_synth_model_write(&s, p.c_str()) == PI_OK, std::string(pi_last_error()));
        return p;
    }();
    return path;
}

std::vector<std::string> folder_listing(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string memory_scratch_dir(const std::string& name) {
    std::error_code ec;
    if (!std::filesystem::is_directory("/dev/shm", ec)) return test::scratch_dir(name);
    // Removed with the program, whatever its tests left there.
    static const struct own_folder {
        std::filesystem::path path =
            std::filesystem::path("/dev/shm") / ("pi_faults_" + std::to_string(::getpid()));
        ~own_folder() {
            std::error_code ignored;
            std::filesystem::remove_all(path, ignored);
        }
    } root;
    const std::filesystem::path p = root.path / name;
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p.string();
}

bool file_exists(const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(path, ec);
}

void widen_error_buffer() {
    const std::string long_path = "/nonexistent/" + std::string(4000, 'x');
    pi_model* m = nullptr;
    CHECK(pi_model_load(long_path.c_str(), nullptr, &m) == PI_ERR_IO);
}

loop_stats for_every_allocation(const char* what, const fault_case& c, bool persistent) {
    INFO(std::string(what) << std::string(persistent ? " (every allocation from the Nth on fails)"
                                                     : ""));
    loop_stats stats;
    stats.statuses.reserve(16); // no allocation inside the tallied part of the loop
    stats.found.assign(c.expected_messages.size(), false);
    widen_error_buffer();
    log_capture quiet;
    quiet.collecting = false;
    char message[1024];
    for (uint64_t n = 1;; n += c.stride) {
        INFO("failing allocation " << n);
        const int64_t before = live_bytes();
        if (c.setup) c.setup();
        arm(n, persistent);
        const pi_status st = c.call();
        const uint64_t allocations_made = allocations();
        const bool faulted = disarm() > 0;
        std::snprintf(message, sizeof message, "%s", pi_last_error());
        c.after(st, faulted);
        CHECK(live_bytes() == before);
        if (!faulted) {
            REQUIRE_MESSAGE(st == PI_OK, std::string(pi_status_str(st))
                                             << ": " << std::string(message));
            stats.allocations = allocations_made;
            // With every later allocation failing too, the messages themselves cannot be built:
            // the failures are plain "out of memory".
            for (size_t i = 0; i < c.expected_messages.size() && !persistent; ++i) {
                const bool seen = stats.found[i];
                CHECK_MESSAGE(seen,
                              "no failure said \"" << std::string(c.expected_messages[i]) << "\"");
            }
            return stats;
        }
        for (size_t i = 0; i < c.expected_messages.size(); ++i)
            if (std::strstr(message, c.expected_messages[i])) stats.found[i] = true;
        ++stats.runs;
        if (st == PI_OK) { // the failure was absorbed (std::stable_sort does without its buffer)
            ++stats.absorbed;
            continue;
        }
        const bool allowed =
            st == PI_ERR_OUT_OF_MEMORY ||
            std::find(c.also_allowed.begin(), c.also_allowed.end(), st) != c.also_allowed.end();
        CHECK_MESSAGE(allowed, std::string(pi_status_str(st)) << ": " << std::string(message));
        CHECK(message[0] != '\0');
        if (std::find(stats.statuses.begin(), stats.statuses.end(), st) == stats.statuses.end())
            stats.statuses.push_back(st);
        if (n >= 200000) FAIL("no run succeeded in 200000 tries");
    }
}

loop_stats for_both_plans(const char* what, const fault_case& c) {
    loop_stats first;
    for (const bool persistent : {false, true}) {
        const loop_stats s = for_every_allocation(what, c, persistent);
        const std::string plan = persistent ? ", every allocation from the Nth on failing: "
                                            : ", the Nth allocation failing: ";
        MESSAGE(std::string(what) << plan << s.runs << " runs with a failed allocation ("
                                  << s.absorbed << " absorbed), " << s.allocations
                                  << " allocations in the run without one");
        if (!persistent) first = s;
    }
    return first;
}

namespace {

void collect(pi_log_level level, const char* message, void* user_data) {
    auto* c = static_cast<log_capture*>(user_data);
    if (level < PI_LOG_WARN) return;
    ++c->count;
    if (c->collecting) c->warnings.emplace_back(message);
}

} // namespace

log_capture::log_capture() {
    pi_log_set(&collect, this);
}

log_capture::~log_capture() {
    pi_log_set(nullptr, nullptr);
}

bool log_capture::any_containing(const std::string& needle) const {
    return std::any_of(warnings.begin(), warnings.end(),
                       [&](const std::string& w) { return w.find(needle) != std::string::npos; });
}

} // namespace pi::faults
