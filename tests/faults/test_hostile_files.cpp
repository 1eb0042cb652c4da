// Hostile files (docs/robustness.md): sizes declared in a file's metadata or tensor infos that
// the file's bytes do not back are refused before anything is allocated for them. Each load
// below fails with PI_ERR_FORMAT naming the cause, returns no model, frees everything, and at
// its peak held less than the file's size plus a small constant (the file itself is held when
// it is read rather than mapped).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "alloc_counter.hpp"
#include "fault_fixture.hpp"
#include "gguf/gguf.hpp"
#include "powerinfer.h"
#include "support/test_support.hpp"

using namespace pi::faults;

namespace {

// What the library may hold besides the file during a failed load: its fixed structures, the
// parsed metadata of the tiny model (a 320-token vocabulary) and the error message.
constexpr int64_t small_constant = int64_t(1) << 20;

const std::string& scratch() {
    static const std::string dir = pi::test::scratch_dir("hostile_files");
    return dir;
}

std::string edited(const std::string& name, const std::function<void(pi::test::model_edit&)>& e) {
    return pi::test::rewrite_model(tiny_model_path(), scratch() + "/" + name, e);
}

pi::gguf::value* key(pi::test::model_edit& e, const std::string& name) {
    for (auto& [k, v] : e.kv)
        if (k == name) return &v;
    FAIL("no key " << name);
    return nullptr;
}

// Little-endian GGUF fields, for files the writer refuses to produce.
struct raw {
    std::vector<uint8_t> b;
    raw& bytes(const char* p, size_t n) {
        for (size_t i = 0; i < n; ++i)
            b.push_back(static_cast<uint8_t>(p[i]));
        return *this;
    }
    raw& little_endian(uint64_t v, int n) {
        for (int i = 0; i < n; ++i)
            b.push_back(static_cast<uint8_t>(v >> (8 * i)));
        return *this;
    }
    raw& u32(uint32_t v) { return little_endian(v, 4); }
    raw& u64(uint64_t v) { return little_endian(v, 8); }
    raw& str(const std::string& s) { return u64(s.size()).bytes(s.data(), s.size()); }
    raw& zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
    raw& pad(size_t alignment) { return zeros((alignment - b.size() % alignment) % alignment); }
    std::string save(const std::string& name) const {
        const std::string path = scratch() + "/" + name;
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        return path;
    }
};

// Loads `path` mapped and read: PI_ERR_FORMAT with `needle` in the message, no model, nothing
// kept, and a peak below the file's size plus small_constant. Returns the highest peak.
int64_t expect_refused(const std::string& path, const std::string& needle) {
    const auto file_size = static_cast<int64_t>(std::filesystem::file_size(path));
    const int64_t bound = file_size + small_constant;
    int64_t highest = 0;
    widen_error_buffer();
    for (const int use_mmap : {1, 0}) {
        CAPTURE(use_mmap);
        pi_model_params p = pi_model_default_params();
        p.use_mmap = use_mmap;
        pi_model* m = reinterpret_cast<pi_model*>(&p); // must come back NULL
        const int64_t before = live_bytes();
        reset_peak();
        const pi_status st = pi_model_load(path.c_str(), &p, &m);
        const int64_t peak = peak_bytes() - before;
        CHECK(live_bytes() == before);
        CHECK(st == PI_ERR_FORMAT);
        CHECK(m == nullptr);
        const std::string message = pi_last_error();
        CHECK_MESSAGE(message.find(needle) != std::string::npos, message);
        CHECK_MESSAGE(peak < bound, "peak " << peak << " bytes for a " << file_size
                                            << "-byte file, bound " << bound);
        highest = std::max(highest, peak);
    }
    MESSAGE(std::filesystem::path(path).filename().string()
            << ": " << file_size << "-byte file, peak " << highest << " bytes");
    return highest;
}

// Loads `path` mapped and read, which must succeed, and frees the model. Returns the peak of each
// load, mapped first.
std::vector<int64_t> load_peaks(const std::string& path) {
    std::vector<int64_t> peaks;
    widen_error_buffer();
    for (const int use_mmap : {1, 0}) {
        CAPTURE(use_mmap);
        pi_model_params p = pi_model_default_params();
        p.use_mmap = use_mmap;
        pi_model* m = nullptr;
        const int64_t before = live_bytes();
        reset_peak();
        REQUIRE_MESSAGE(pi_model_load(path.c_str(), &p, &m) == PI_OK, pi_last_error());
        peaks.push_back(peak_bytes() - before);
        pi_model_free(m);
    }
    return peaks;
}

} // namespace

TEST_CASE("hyper-parameters the tensors do not back are refused before anything is built") {
    expect_refused(edited("n_embd.gguf",
                          [](auto& e) {
                              key(e, "llama.embedding_length")->data = uint64_t{1} << 24;
                              key(e, "llama.rope.dimension_count")->data = uint64_t{1} << 23;
                          }),
                   "token_embd.weight");
    expect_refused(
        edited("n_ff.gguf",
               [](auto& e) { key(e, "llama.feed_forward_length")->data = uint64_t{1} << 24; }),
        "ffn_");
    expect_refused(
        edited("n_layer.gguf", [](auto& e) { key(e, "llama.block_count")->data = uint64_t{4000}; }),
        "blk.3999.attn_norm.weight");
    expect_refused(edited("n_layer_huge.gguf",
                          [](auto& e) { key(e, "llama.block_count")->data = uint64_t{1} << 30; }),
                   "block_count");
    expect_refused(
        edited("n_vocab.gguf",
               [](auto& e) {
                   for (const char* k : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                         "tokenizer.ggml.token_type"}) {
                       auto& arr = std::get<pi::gguf::array_value>(key(e, k)->data);
                       auto elements = arr.elements();
                       elements.insert(elements.end(), 100000, elements.back());
                       arr = pi::gguf::array_value::from_elements(arr.elem_type(), elements);
                   }
               }),
        "vocabulary has 100320 tokens but token_embd has 320 rows");
}

TEST_CASE("counts and sizes the file's bytes do not hold are refused before allocating") {
    const std::string arch = "general.architecture";
    // A metadata array that declares 2^40 elements.
    expect_refused(raw{}
                       .bytes("GGUF", 4)
                       .u32(3)
                       .u64(0)
                       .u64(1)
                       .str("tokenizer.ggml.tokens")
                       .u32(9)
                       .u32(8)
                       .u64(uint64_t{1} << 40)
                       .save("array_2_40.gguf"),
                   "array count 1099511627776");
    // n_kv and n_tensors far beyond the bytes.
    expect_refused(raw{}.bytes("GGUF", 4).u32(3).u64(1).u64(uint64_t{1} << 50).save("n_kv.gguf"),
                   "n_kv");
    expect_refused(raw{}.bytes("GGUF", 4).u32(3).u64(uint64_t{1} << 50).u64(0).save("n_t.gguf"),
                   "n_tensors");
    // A tensor of 2^30 x 2^30 F32 in a file of a few bytes.
    expect_refused(raw{}
                       .bytes("GGUF", 4)
                       .u32(3)
                       .u64(1)
                       .u64(0)
                       .str("token_embd.weight")
                       .u32(2)
                       .u64(uint64_t{1} << 30)
                       .u64(uint64_t{1} << 30)
                       .u32(0)
                       .u64(0)
                       .pad(32)
                       .zeros(64)
                       .save("huge_tensor.gguf"),
                   "lies outside");
    // Eight tensors declared over the same 4 KiB: each fits, together they are 8 times the data.
    raw aliased;
    aliased.bytes("GGUF", 4).u32(3).u64(8).u64(1).str(arch).u32(8).str("llama");
    for (int i = 0; i < 8; ++i)
        aliased.str(std::string(1, static_cast<char>('a' + i))).u32(1).u64(1024).u32(0).u64(0);
    expect_refused(aliased.pad(32).zeros(4096).save("aliased.gguf"), "overlaps the data of tensor");
}

TEST_CASE("metadata arrays cost no memory beyond the file's bytes, whatever their elements") {
    // 1 Mi empty strings, 4 Mi i32 and 16 Mi u8: held one variant per element, they took 40
    // bytes each; parsed, they are viewed in the file. The hyper-parameters are read and the
    // tensors found missing before the vocabulary's arrays are decoded.
    const uint64_t n_strings = uint64_t{1} << 20;
    const uint64_t n_ints = uint64_t{4} << 20;
    const uint64_t n_bytes = uint64_t{16} << 20;
    raw r;
    r.bytes("GGUF", 4).u32(3).u64(0).u64(10);
    r.str("general.architecture").u32(8).str("falcon");
    const std::pair<const char*, uint32_t> hparams[] = {{"context_length", 64},
                                                        {"embedding_length", 32},
                                                        {"block_count", 2},
                                                        {"feed_forward_length", 64},
                                                        {"attention.head_count", 2}};
    for (const auto& [k, v] : hparams)
        r.str(std::string("falcon.") + k).u32(4).u32(v);
    r.str("tokenizer.ggml.model").u32(8).str("gpt2");
    r.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(n_strings).zeros(8 * n_strings);
    r.str("tokenizer.ggml.token_type").u32(9).u32(5).u64(n_ints).zeros(4 * n_ints);
    r.str("junk").u32(9).u32(0).u64(n_bytes).zeros(n_bytes);
    expect_refused(r.save("arrays.gguf"), "missing tensor 'token_embd.weight'");
}

TEST_CASE("a model whose metadata holds huge arrays loads holding no more than their bytes") {
    const uint64_t n = uint64_t{8} << 20;
    const std::vector<uint8_t> zeros(n);
    const std::string path = edited("junk_arrays.gguf", [&](auto& e) {
        using pi::gguf::array_value;
        using pi::gguf::value_type;
        auto add = [&](const char* k, value_type t, uint64_t count) {
            e.kv.emplace_back(
                k, pi::gguf::value{value_type::array, array_value::view(t, count, zeros)});
        };
        add("junk.strings", value_type::string, n / 8); // 1 Mi empty strings
        add("junk.ints", value_type::i32, n / 4);
        add("junk.bytes", value_type::u8, n);
    });
    const auto plain_size = static_cast<int64_t>(std::filesystem::file_size(tiny_model_path()));
    const auto size = static_cast<int64_t>(std::filesystem::file_size(path));
    const std::vector<int64_t> plain = load_peaks(tiny_model_path());
    const std::vector<int64_t> junk = load_peaks(path);
    // Mapped, the arrays cost their keys' entries and nothing more; read, their bytes besides.
    const int64_t entries = int64_t{16} << 10;
    CHECK(junk[0] < plain[0] + entries);
    CHECK(junk[1] < plain[1] + (size - plain_size) + entries);
    CHECK(junk[1] < size + small_constant);
    MESSAGE("tiny model " << plain_size << " bytes: peak " << plain[0] << " mapped, " << plain[1]
                          << " read; with " << size - plain_size << " bytes of arrays: " << junk[0]
                          << " mapped, " << junk[1] << " read");
}
