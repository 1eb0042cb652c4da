// The quantizer streams its output (gguf::tensor_stream): the file it writes a piece at a time is
// the file the in-memory writer writes, misuse and failures leave no file behind, and the
// quantizer's memory stays at about one tensor however large the model is.
#include <doctest/doctest.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "model/quantize_model.hpp"
#include "quant/types.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

#if !defined(_WIN32)
#include <sys/resource.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define PI_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PI_TEST_UNDER_ASAN 1
#endif
#endif

using pi::ggml_type;
namespace fs = std::filesystem;

namespace {

std::vector<char> bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i)
        v[i] = static_cast<uint8_t>(seed + i * 7);
    return v;
}

size_t entries(const std::string& dir) {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir), fs::directory_iterator{}));
}

// Peak resident memory through /proc (Linux): reset_peak() restarts VmHWM at the current RSS.
struct memory_probe {
    static bool reset_peak() {
        std::ofstream clear("/proc/self/clear_refs");
        clear << "5";
        clear.flush();
        return clear.good();
    }
    static int64_t kib(const std::string& field) {
        std::ifstream status("/proc/self/status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
        return -1;
    }
};

} // namespace

TEST_CASE("tensor_stream: data in pieces, mixed with held tensors, equals the in-memory file") {
    const std::string dir = pi::test::scratch_dir("quantize_stream_pieces");
    const std::vector<int64_t> a_dims = {64, 3}, b_dims = {5}, c_dims = {32, 2};
    const std::vector<uint8_t> a = pattern(64 * 3 * 4, 1), b = pattern(5 * 4, 2),
                               c = pattern(2 * 34, 3); // two Q8_0 blocks
    auto metadata = [](pi::gguf::writer& w) {
        w.set_string("general.architecture", "llama");
        w.set_u32("general.alignment", 64);
    };
    pi::gguf::writer held(true, 64);
    metadata(held);
    held.add_tensor("a", ggml_type::f32, a_dims, a);
    held.add_tensor("b", ggml_type::f32, b_dims, b);
    held.add_tensor("c", ggml_type::q8_0, c_dims, c);
    const std::string expected = (fs::path(dir) / "held.gguf").string();
    held.write(expected);

    pi::gguf::writer declared(true, 64);
    metadata(declared);
    declared.add_tensor_info("a", ggml_type::f32, a_dims);
    declared.add_tensor("b", ggml_type::f32, b_dims, b); // written by the stream in its turn
    declared.add_tensor_info("c", ggml_type::q8_0, c_dims);
    const std::string streamed = (fs::path(dir) / "streamed.gguf").string();
    {
        pi::gguf::tensor_stream out(declared, streamed);
        out.append(std::span<const uint8_t>(a).first(100));
        out.append(std::span<const uint8_t>(a).subspan(100));
        CHECK_FALSE(fs::exists(streamed)); // only the temporary file until commit
        out.append(c);
        out.commit();
    }
    CHECK(bytes_of(streamed) == bytes_of(expected));
    CHECK(entries(dir) == 2);
}

TEST_CASE("tensor_stream: too much, too little or missing data fails and leaves no file") {
    const std::string dir = pi::test::scratch_dir("quantize_stream_errors");
    const std::string path = (fs::path(dir) / "out.gguf").string();
    pi::gguf::writer w(false);
    const std::vector<int64_t> dims = {8};
    w.add_tensor_info("blk.0.x", ggml_type::f32, dims);
    auto message = [](auto&& f) -> std::string {
        try {
            f();
        } catch (const pi::error& e) {
            CHECK(e.code() == pi::status::invalid_argument);
            return e.what();
        }
        return "no error";
    };
    {
        pi::gguf::tensor_stream out(w, path);
        const std::vector<uint8_t> nine(36);
        CHECK(message([&] { out.append(nine); }).find("'blk.0.x' needs 32 more bytes") !=
              std::string::npos);
        out.append(std::span<const uint8_t>(nine).first(20));
        CHECK(message([&] { out.commit(); }).find("'blk.0.x' got 20 of its 32 bytes") !=
              std::string::npos);
        out.append(std::span<const uint8_t>(nine).first(12));
        CHECK(message([&] { out.append(nine); }).find("beyond the last tensor") !=
              std::string::npos);
    } // destroyed without commit: the temporary file goes
    CHECK(entries(dir) == 0);
    // write() needs the data of every tensor.
    CHECK(message([&] { w.write(path); }).find("'blk.0.x' got 0 of its 32 bytes") !=
          std::string::npos);
    CHECK(entries(dir) == 0);
    // An unwritable target fails at once, naming it.
    const std::string no_dir = (fs::path(dir) / "missing" / "out.gguf").string();
    try {
        pi::gguf::tensor_stream out(w, no_dir);
        FAIL("opened a file in a missing folder");
    } catch (const pi::error& e) {
        CHECK(e.code() == pi::status::io);
        CHECK(std::string(e.what()).find(no_dir) != std::string::npos);
    }
}

#if !defined(_WIN32) // RLIMIT_FSIZE and SIGXFSZ are POSIX
// A write that fails (here: past RLIMIT_FSIZE) names the output file and the tensor, and the
// temporary file goes.
TEST_CASE("a failed write names the file and the tensor and leaves nothing") {
    const std::string dir = pi::test::scratch_dir("quantize_stream_write_error");
    const std::string in = (fs::path(dir) / "in.gguf").string();
    {
        pi::gguf::writer w(true);
        const std::vector<int64_t> dims = {256, 64};
        for (int i = 0; i < 4; ++i)
            w.add_tensor("blk." + std::to_string(i) + ".ffn_up.weight", ggml_type::f32, dims,
                         pattern(256 * 64 * 4, static_cast<uint8_t>(i)));
        w.write(in);
    }
    const std::string out_dir = (fs::path(dir) / "out").string();
    fs::create_directory(out_dir);
    const std::string out = (fs::path(out_dir) / "out.gguf").string();
    pi::quantize_options o;
    o.target = pi::file_type::mostly_f16; // 32 KiB a tensor: the second one crosses the limit
    o.n_threads = 2;

    rlimit old_limit{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN); // the write fails with EFBIG instead
    rlimit limit = old_limit;
    limit.rlim_cur = 48 * 1024;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    std::string message = "no error";
    pi::status code = pi::status::ok;
    try {
        pi::quantize_model(in, out, o);
    } catch (const pi::error& e) {
        message = e.what();
        code = e.code();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
    CAPTURE(message);
    CHECK(code == pi::status::io);
    CHECK(message.find(out) != std::string::npos);
    CHECK(message.find("in tensor 'blk.1.ffn_up.weight'") != std::string::npos);
    CHECK(entries(out_dir) == 0);
}
#endif

// The bound: a model of 32 tensors, each 1M F16 elements, to F32 (4 MiB per output tensor,
// 128 MiB in all). Holding the outputs passes 128 MiB, keeping the mapped input resident 64 MiB;
// streaming needs one tensor's output and one chunk of input (about 6 MiB) plus noise. Not under
// AddressSanitizer, whose quarantine keeps freed memory resident (about 1 MiB a tensor here).
TEST_CASE("quantizing a model many tensors large grows peak memory by about one tensor") {
#if defined(PI_TEST_UNDER_ASAN)
    MESSAGE("SKIPPED under AddressSanitizer: its quarantine keeps freed memory resident");
    return;
#endif
    const std::string dir = pi::test::scratch_dir("quantize_stream_memory");
    const int n_tensors = 32;
    const std::vector<int64_t> dims = {1024, 1024};
    const std::string in = (fs::path(dir) / "in.gguf").string();
    {
        pi::gguf::writer w(true);
        w.set_string("general.architecture", "llama");
        for (int i = 0; i < n_tensors; ++i)
            w.add_tensor_info("blk." + std::to_string(i) + ".ffn_up.weight", ggml_type::f16, dims);
        pi::gguf::tensor_stream out(w, in);
        std::vector<float> row(1024);
        std::vector<uint8_t> bytes(2048);
        for (int i = 0; i < n_tensors * 1024; ++i) {
            for (size_t k = 0; k < row.size(); ++k)
                row[k] = static_cast<float>((i + 3 * static_cast<int>(k)) % 97) / 97.0f - 0.5f;
            REQUIRE(pi::quantize_row(ggml_type::f16, row, bytes));
            out.append(bytes);
        }
        out.commit();
    }
    pi::quantize_options o;
    o.target = pi::file_type::all_f32;
    o.n_threads = 2;
    const std::string out = (fs::path(dir) / "out.gguf").string();
    pi::quantize_model(in, out, o); // starts the worker threads before the measurement
    fs::remove(out);

    if (!memory_probe::reset_peak() || memory_probe::kib("VmHWM") < 0) {
        MESSAGE("SKIPPED: no /proc/self/clear_refs to reset the peak RSS");
        return;
    }
    const int64_t before = memory_probe::kib("VmRSS");
    pi::quantize_model(in, out, o);
    const int64_t growth = memory_probe::kib("VmHWM") - before;
    MESSAGE("peak RSS growth while quantizing 128 MiB of output: ", growth, " KiB");
    CHECK(growth < 20 * 1024);
    CHECK(fs::file_size(out) > static_cast<uintmax_t>(n_tensors) * 4 * 1024 * 1024);
}

TEST_CASE("tensor_stream: two streams to one target get temporary files of their own") {
    const std::string dir = pi::test::scratch_dir("quantize_stream_two");
    const std::string path = (fs::path(dir) / "out.gguf").string();
    const std::vector<int64_t> dims = {4};
    const std::vector<uint8_t> first = pattern(16, 1), second = pattern(16, 9);
    pi::gguf::writer w(false);
    w.add_tensor_info("x", ggml_type::f32, dims);
    {
        pi::gguf::tensor_stream a(w, path);
        pi::gguf::tensor_stream b(w, path);
        CHECK(entries(dir) == 2);
        a.append(first);
        b.append(second);
        a.commit();
        b.commit();
    }
    // The later commit wins whole; neither stream wrote into the other's file.
    pi::gguf::writer expected(false);
    expected.add_tensor("x", ggml_type::f32, dims, second);
    const std::string reference = (fs::path(dir) / "reference.gguf").string();
    expected.write(reference);
    CHECK(bytes_of(path) == bytes_of(reference));
    CHECK(entries(dir) == 2);
}
