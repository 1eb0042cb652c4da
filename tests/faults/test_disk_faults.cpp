// Full disks and unwritable folders (docs/robustness.md): pi_model_quantize and pi-quantize fail
// with a clear error and leave neither the output nor a temporary file, the input untouched; a
// GPU-index cache that cannot be written is a warning and the load succeeds; a state file that
// cannot be written is PI_ERR_IO and the file already at that path stays as it was.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "fault_fixture.hpp"
#include "os_faults.hpp"
#include "powerinfer.h"
#include "support/test_support.hpp"

using namespace pi::faults;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
}

pi_quantize_params q4_0() {
    pi_quantize_params qp = pi_quantize_default_params();
    qp.type = "Q4_0";
    qp.n_threads = 1;
    return qp;
}

// A copy of the tiny model in a folder of its own, readable by anyone.
std::string model_copy(const std::string& dir) {
    const std::string path = dir + "/model.gguf";
    fs::copy_file(tiny_model_path(), path);
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                              fs::perms::others_read);
    return path;
}

void write_text(const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
}

std::string text_of(const std::string& path) {
    const std::vector<uint8_t> bytes = file_bytes(path);
    return std::string(bytes.begin(), bytes.end());
}

pi_model_params offload_params() {
    pi_model_params mp = pi_model_default_params();
    mp.offload_device = "cpu"; // the hybrid path without a GPU: it plans and caches a GPU index
    mp.vram_budget = 32.0 * 1024 * 1024;
    return mp;
}

pi_context_params small_context() {
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 16;
    cp.n_threads = 1;
    return cp;
}

// One greedy token of a model, to see that it works.
pi_token first_token(pi_model* m) {
    const pi_context_params cp = small_context();
    pi_context* ctx = nullptr;
    REQUIRE(pi_context_create(m, &cp, &ctx) == PI_OK);
    const pi_token prompt[] = {1, 300, 301};
    pi_batch b{3, prompt, nullptr, nullptr};
    REQUIRE(pi_decode(ctx, &b) == PI_OK);
    const float* logits = pi_get_logits(ctx, -1);
    pi_token best = 0;
    for (int32_t i = 1; i < pi_n_vocab(m); ++i)
        if (logits[i] > logits[best]) best = i;
    pi_context_free(ctx);
    return best;
}

} // namespace

TEST_CASE("pi_model_quantize to a full disk is PI_ERR_IO and leaves no file") {
    const std::string dir = pi::test::scratch_dir("disk_quantize_full");
    const std::string out = dir + "/out.gguf";
    const std::vector<uint8_t> input = file_bytes(tiny_model_path());
    const pi_quantize_params qp = q4_0();
    for (const rlim_t room : {rlim_t{0}, rlim_t{100}, rlim_t{4096}, rlim_t{12000}}) {
        CAPTURE(room);
        pi_status st;
        {
            const file_size_limit full(room);
            st = pi_model_quantize(tiny_model_path().c_str(), out.c_str(), &qp);
        }
        CHECK(st == PI_ERR_IO);
        const std::string message = pi_last_error();
        CHECK(contains(message, "File too large"));
        CHECK(contains(message, dir));
        CHECK(folder_listing(dir).empty());
    }
    CHECK(file_bytes(tiny_model_path()) == input);
    REQUIRE(pi_model_quantize(tiny_model_path().c_str(), out.c_str(), &qp) == PI_OK);
    CHECK(file_bytes(out).size() > 12000); // the limits above all cut it short
}

TEST_CASE("pi_model_quantize into an unwritable folder is PI_ERR_IO naming the path") {
    const std::string dir = pi::test::scratch_dir("disk_quantize_unwritable");
    const std::string blocker = dir + "/not-a-folder";
    write_text(blocker, "a regular file");
    const pi_quantize_params qp = q4_0();
    CHECK(pi_model_quantize(tiny_model_path().c_str(), (blocker + "/out.gguf").c_str(), &qp) ==
          PI_ERR_IO);
    CHECK(contains(pi_last_error(), blocker + "/out.gguf"));
    CHECK(contains(pi_last_error(), "Not a directory"));
    CHECK(text_of(blocker) == "a regular file");

    const std::string locked = dir + "/locked";
    fs::create_directory(locked);
    const std::string model = tiny_model_path();
    const int status = run_without_write_access(locked, [&] {
        const pi_quantize_params p = q4_0();
        const pi_status st = pi_model_quantize(model.c_str(), (locked + "/out.gguf").c_str(), &p);
        if (st != PI_ERR_IO) return 1;
        if (!contains(pi_last_error(), "Permission denied")) return 2;
        return 0;
    });
    REQUIRE_MESSAGE(status != 126, "could not drop privileges to test an unwritable folder");
    CHECK(status == 0);
    CHECK(folder_listing(locked).empty());
}

#ifdef PI_QUANTIZE_TOOL
TEST_CASE("pi-quantize to a full disk or an unwritable folder exits 1 with the reason") {
    const std::string dir = pi::test::scratch_dir("disk_pi_quantize");
    const std::string out = dir + "/out.gguf";
    const std::vector<uint8_t> input = file_bytes(tiny_model_path());
    std::string err;
    CHECK(run_program({PI_QUANTIZE_TOOL, tiny_model_path(), out, "Q4_0", "-t", "1"}, 4096, err) ==
          1);
    CHECK(contains(err, "File too large"));
    CHECK(contains(err, "PI_ERR_IO"));
    CHECK(folder_listing(dir).empty());

    const std::string blocker = dir + "/file";
    write_text(blocker, "x");
    CHECK(run_program({PI_QUANTIZE_TOOL, tiny_model_path(), blocker + "/out.gguf", "Q4_0"}, 0,
                      err) == 1);
    CHECK(contains(err, "Not a directory"));
    CHECK(folder_listing(dir) == std::vector<std::string>{"file"});
    CHECK(file_bytes(tiny_model_path()) == input);
}
#endif

TEST_CASE("a GPU-index cache that cannot be written is a warning and the load succeeds") {
    const std::string dir = pi::test::scratch_dir("disk_gpu_index");
    const std::string model = model_copy(dir);
    const std::string cache = model + ".generated.gpuidx";
    pi_token want;
    {
        pi_model_params plain = pi_model_default_params();
        pi_model* m = nullptr;
        REQUIRE(pi_model_load(model.c_str(), &plain, &m) == PI_OK);
        want = first_token(m);
        pi_model_free(m);
    }
    const pi_model_params mp = offload_params();

    SUBCASE("a full disk") {
        log_capture log;
        pi_model* m = nullptr;
        pi_status st;
        {
            const file_size_limit full(100);
            st = pi_model_load(model.c_str(), &mp, &m);
        }
        REQUIRE_MESSAGE(st == PI_OK, std::string(pi_last_error()));
        CHECK(log.any_containing("could not cache the GPU index"));
        CHECK(log.any_containing("File too large"));
        CHECK(first_token(m) == want);
        pi_model_free(m);
        CHECK(folder_listing(dir) == std::vector<std::string>{"model.gguf"});
    }
    SUBCASE("its path taken by a folder") {
        fs::create_directory(cache);
        log_capture log;
        pi_model* m = nullptr;
        REQUIRE_MESSAGE(pi_model_load(model.c_str(), &mp, &m) == PI_OK,
                        std::string(pi_last_error()));
        CHECK(log.any_containing("could not cache the GPU index"));
        CHECK(first_token(m) == want);
        pi_model_free(m);
        CHECK(fs::is_directory(cache));
        CHECK(folder_listing(dir) ==
              std::vector<std::string>{"model.gguf", "model.gguf.generated.gpuidx"});
    }
    SUBCASE("a read-only folder") {
        const int status = run_without_write_access(dir, [&] {
            log_capture log;
            pi_model* m = nullptr;
            if (pi_model_load(model.c_str(), &mp, &m) != PI_OK) return 1;
            const bool warned = log.any_containing("could not cache the GPU index") &&
                                log.any_containing("Permission denied");
            const bool works = first_token(m) == want;
            pi_model_free(m);
            return warned ? (works ? 0 : 3) : 2;
        });
        REQUIRE_MESSAGE(status != 126, "could not drop privileges to test an unwritable folder");
        CHECK(status == 0);
        CHECK(folder_listing(dir) == std::vector<std::string>{"model.gguf"});
    }
}

TEST_CASE("a state file that cannot be written is PI_ERR_IO and the old file stays whole") {
    const std::string dir = pi::test::scratch_dir("disk_state");
    const std::string path = dir + "/state.bin";
    pi_model_params plain = pi_model_default_params();
    pi_model* m = nullptr;
    REQUIRE(pi_model_load(tiny_model_path().c_str(), &plain, &m) == PI_OK);
    const pi_context_params cp = small_context();
    pi_context* ctx = nullptr;
    REQUIRE(pi_context_create(m, &cp, &ctx) == PI_OK);
    const pi_token prompt[] = {1, 300, 301, 302};
    pi_batch b{4, prompt, nullptr, nullptr};
    REQUIRE(pi_decode(ctx, &b) == PI_OK);
    write_text(path, "the previous state");

    SUBCASE("a full disk") {
        {
            const file_size_limit full(64);
            CHECK(pi_context_state_save_file(ctx, -1, nullptr, path.c_str()) == PI_ERR_IO);
        }
        CHECK(contains(pi_last_error(), "File too large"));
        CHECK(contains(pi_last_error(), path));
    }
    SUBCASE("a folder that is a file") {
        const std::string inside = path + "/state.bin";
        CHECK(pi_context_state_save_file(ctx, -1, nullptr, inside.c_str()) == PI_ERR_IO);
        CHECK(contains(pi_last_error(), inside));
    }
    SUBCASE("a read-only folder") {
        const int status = run_without_write_access(dir, [&] {
            if (pi_context_state_save_file(ctx, -1, nullptr, path.c_str()) != PI_ERR_IO) return 1;
            return contains(pi_last_error(), "Permission denied") ? 0 : 2;
        });
        REQUIRE_MESSAGE(status != 126, "could not drop privileges to test an unwritable folder");
        CHECK(status == 0);
    }
    CHECK(text_of(path) == "the previous state");
    CHECK(folder_listing(dir) == std::vector<std::string>{"state.bin"});
    // The context is unharmed: saving where there is room works and loads back.
    REQUIRE(pi_context_state_save_file(ctx, -1, nullptr, path.c_str()) == PI_OK);
    pi_context* copy = nullptr;
    REQUIRE(pi_context_create(m, &cp, &copy) == PI_OK);
    CHECK(pi_context_state_load_file(copy, -1, nullptr, path.c_str()) == PI_OK);
    CHECK(pi_context_n_past(copy) == 4);
    pi_context_free(copy);
    pi_context_free(ctx);
    pi_model_free(m);
}

TEST_CASE("a model read into memory is unharmed when its file is truncated or overwritten") {
    const std::string dir = pi::test::scratch_dir("disk_truncated");
    const std::string model = model_copy(dir);
    pi_model_params mp = pi_model_default_params();
    mp.use_mmap = 0;
    pi_model* m = nullptr;
    REQUIRE(pi_model_load(model.c_str(), &mp, &m) == PI_OK);
    const pi_token want = first_token(m);
    fs::resize_file(model, 64);
    CHECK(first_token(m) == want);
    write_text(model, std::string(4096, 'z'));
    CHECK(first_token(m) == want);
    pi_model_free(m);
}
