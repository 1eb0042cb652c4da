// Malformed GGUF input: every case must fail with pi::error naming the file and the cause,
// and never read outside the file (the Debug suite runs under ASan+UBSan).
#include <algorithm>
#include <limits>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "gguf_test_util.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

namespace {

using namespace pi;
using test::expect_open_error;
using test::raw_gguf;

constexpr uint32_t f32_id = 0;
constexpr uint32_t q4_0_id = 2;

// Writes `r`, then expects open() to fail with a format error containing `word`.
void expect_rejected(const std::string& dir, const raw_gguf& r, std::string_view word) {
    const std::string path = dir + "/bad.gguf";
    test::save(path, r.b);
    expect_open_error(path, word);
}

// Byte offset where the last tensor's data ends: shorter prefixes must be rejected.
uint64_t required_size(const gguf::file& f) {
    uint64_t end = 0;
    for (const auto& t : f.tensors())
        end = std::max(end, f.data_offset() + t.offset + t.n_bytes);
    return end;
}

// Opens every prefix of `bytes` whose length is a multiple of `stride` (plus the last bytes
// before the required end): short ones must fail with a format error, long ones must load.
void check_truncations(const std::string& dir, const std::vector<uint8_t>& bytes, uint64_t required,
                       size_t stride) {
    const std::string path = dir + "/cut.gguf";
    std::vector<size_t> cuts;
    for (size_t n = 0; n < bytes.size(); n += stride)
        cuts.push_back(n);
    for (size_t n = required > 3 ? required - 3 : 0; n < bytes.size(); ++n)
        cuts.push_back(n);
    size_t rejected = 0;
    for (const size_t n : cuts) {
        INFO("prefix of " << n << " of " << bytes.size() << " bytes");
        test::save(path, {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)});
        if (n < required) {
            try {
                auto f = gguf::file::open(path);
                FAIL_CHECK("a truncated file was accepted");
            } catch (const error& e) {
                ++rejected;
                if (e.code() != status::format)
                    FAIL_CHECK("status " << int(e.code()) << ": " << e.what());
                if (std::string(e.what()).find(path) == std::string::npos)
                    FAIL_CHECK("message without the path: " << e.what());
            }
        } else {
            CHECK(gguf::file::open(path)->tensors().size() > 0);
        }
    }
    CHECK(rejected > 0);
}

TEST_CASE("every truncation of a small file is rejected as a format error") {
    const std::string dir = test::scratch_dir("gguf_cut_small");
    gguf::writer w(true);
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "a"});
    const float scores[] = {0.f, 1.f, 2.f};
    w.set_f32_array("tokenizer.ggml.scores", scores);
    w.set_bool("flag", true);
    const int64_t d1[] = {3};
    const int64_t d2[] = {2, 2};
    w.add_tensor("a", ggml_type::f32, d1, std::vector<uint8_t>(12, 1));
    w.add_tensor("b", ggml_type::i32, d2, std::vector<uint8_t>(16, 2));
    w.write(dir + "/full.gguf");
    const auto bytes = test::load(dir + "/full.gguf");
    const uint64_t required = required_size(*gguf::file::open(dir + "/full.gguf"));
    CHECK(required < bytes.size()); // the writer pads the last tensor
    check_truncations(dir, bytes, required, 1);
}

TEST_CASE("a stride of truncations through a larger file is rejected as a format error") {
    const std::string dir = test::scratch_dir("gguf_cut_large");
    gguf::writer w(false, 64);
    std::vector<std::string> tokens;
    std::vector<float> scores;
    for (int i = 0; i < 3000; ++i) {
        tokens.push_back("tok" + std::to_string(i));
        scores.push_back(static_cast<float>(-i));
    }
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_f32_array("tokenizer.ggml.scores", scores);
    const int64_t dq[] = {256, 64};
    const int64_t df[] = {1000};
    w.add_tensor("q", ggml_type::q4_0, dq, std::vector<uint8_t>(64 * 8 * 18, 7));
    w.add_tensor("f", ggml_type::f32, df, std::vector<uint8_t>(4000, 9));
    w.write(dir + "/full.gguf");
    const auto bytes = test::load(dir + "/full.gguf");
    const uint64_t required = required_size(*gguf::file::open(dir + "/full.gguf"));
    check_truncations(dir, bytes, required, 331);
}

TEST_CASE("a missing file is an io error and an empty one a format error") {
    const std::string dir = test::scratch_dir("gguf_missing");
    expect_open_error(dir + "/nope.gguf", "nope.gguf", status::io);
    expect_open_error(dir, "regular file", status::io);
    expect_rejected(dir, raw_gguf{}, "empty");
}

TEST_CASE("wrong magic and unsupported versions are rejected") {
    const std::string dir = test::scratch_dir("gguf_header");
    expect_rejected(dir, raw_gguf{}.header(0, 0, 3, "GGML"), "magic");
    expect_rejected(dir, raw_gguf{}.bytes("GG", 2), "magic");
    expect_rejected(dir, raw_gguf{}.header(0, 0, 1), "GGUFv1 is no longer supported");
    expect_rejected(dir, raw_gguf{}.header(0, 0, 4), "version 4");
    expect_rejected(dir, raw_gguf{}.header(0, 0, 0), "version 0");
    expect_rejected(dir, raw_gguf{}.header(0, 0, 0x03000000u), "big-endian");
    expect_rejected(dir, raw_gguf{}.header(0, 0, 0x03000000u, "PWRI"), "big-endian");
    test::save(dir + "/v2.gguf", raw_gguf{}.header(0, 0, 2).b);
    CHECK(gguf::file::open(dir + "/v2.gguf")->version() == 2);
}

TEST_CASE("counts and lengths larger than the file fail before any allocation") {
    const std::string dir = test::scratch_dir("gguf_counts");
    expect_rejected(dir, raw_gguf{}.header(uint64_t{1} << 40, 0), "n_tensors");
    expect_rejected(dir, raw_gguf{}.header(0, uint64_t{1} << 60), "n_kv");
    expect_rejected(dir, raw_gguf{}.header(0, std::numeric_limits<uint64_t>::max()), "n_kv");
    // Key and string value of length 2^63.
    expect_rejected(dir, raw_gguf{}.header(0, 1).u64(uint64_t{1} << 63).zeros(16), "length");
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("k").u32(8).u64(uint64_t{1} << 63).zeros(8),
                    "length");
    // Arrays of 2^62 u8 and of 2^60 strings.
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("k").u32(9).u32(0).u64(uint64_t{1} << 62),
                    "array count");
    expect_rejected(dir,
                    raw_gguf{}.header(0, 1).str("k").u32(9).u32(8).u64(uint64_t{1} << 60).zeros(64),
                    "array count");
    // A string inside an array that runs past the end.
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("k").u32(9).u32(8).u64(2).str("ok").u64(99),
                    "length");
}

TEST_CASE("unknown and nested value types are rejected naming the key") {
    const std::string dir = test::scratch_dir("gguf_value_types");
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("my.key").u32(13).u32(0),
                    "unknown value type");
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("my.key").u32(13).u32(0), "my.key");
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("k").u32(9).u32(9).u64(0), "nested");
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("k").u32(9).u32(99).u64(0), "element");
    expect_rejected(dir, raw_gguf{}.header(0, 1).str("k").u32(7).u8(2).zeros(8), "bool");
    expect_rejected(dir, raw_gguf{}.header(0, 2).kv_u32("dup", 1).kv_u32("dup", 2),
                    "duplicate key");
}

TEST_CASE("bad general.alignment values are rejected") {
    const std::string dir = test::scratch_dir("gguf_alignment");
    expect_rejected(dir, raw_gguf{}.header(0, 1).kv_u32("general.alignment", 48), "power of two");
    expect_rejected(dir, raw_gguf{}.header(0, 1).kv_u32("general.alignment", 0), "power of two");
    expect_rejected(dir, raw_gguf{}.header(0, 1).kv_string("general.alignment", "32"),
                    "u32 or u64");
    raw_gguf huge; // a power of two, but the data section would start far past the end
    huge.header(1, 1).str("general.alignment").u32(10).u64(uint64_t{1} << 63);
    huge.tensor("w", {4}, f32_id, 0).zeros(64);
    expect_rejected(dir, huge, "beyond the end");
}

TEST_CASE("bad tensor infos are rejected naming the tensor") {
    const std::string dir = test::scratch_dir("gguf_tensor_infos");
    auto one = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
        raw_gguf r;
        r.header(1, 0).tensor("blk.0.w", std::move(dims), type, offset).pad_to(32).zeros(256);
        return r;
    };
    expect_rejected(dir, one({4}, 4, 0), "unknown tensor type id 4");
    expect_rejected(dir, one({4}, 1000, 0), "tensor type");
    expect_rejected(dir, one({4}, 1000, 0), "blk.0.w");
    expect_rejected(dir, one({1, 1, 1, 1, 1}, f32_id, 0), "n_dims = 5");
    expect_rejected(dir, one({}, f32_id, 0), "n_dims = 0");
    expect_rejected(dir, one({uint64_t{1} << 63}, f32_id, 0), "negative");
    expect_rejected(dir, one({uint64_t{1} << 32, uint64_t{1} << 32}, f32_id, 0), "overflow");
    expect_rejected(dir, one({16}, q4_0_id, 0), "block size");
    expect_rejected(dir, one({4}, f32_id, 4), "aligned");
    expect_rejected(dir, one({4}, f32_id, 256), "outside");
    expect_rejected(dir, one({4}, f32_id, uint64_t{1} << 62), "outside");
    expect_rejected(dir, one({128}, f32_id, 0), "outside");
    expect_rejected(dir, one({uint64_t{1} << 40}, f32_id, 0), "outside");
    test::save(dir + "/ok.gguf", one({64}, f32_id, 0).b);
    CHECK(gguf::file::open(dir + "/ok.gguf")->find_tensor("blk.0.w")->n_bytes == 256);

    raw_gguf dup;
    dup.header(2, 0).tensor("w", {4}, f32_id, 0).tensor("w", {4}, f32_id, 32).pad_to(32).zeros(64);
    expect_rejected(dir, dup, "duplicate tensor");

    raw_gguf beyond; // infos end past the file's last padded byte
    beyond.header(1, 0).tensor("w", {0}, f32_id, 0);
    expect_rejected(dir, beyond, "beyond the end");
}

TEST_CASE("tensors whose data overlap are rejected naming both") {
    const std::string dir = test::scratch_dir("gguf_overlap");
    raw_gguf same; // two tensors over the same 64 bytes
    same.header(2, 0).tensor("a", {16}, f32_id, 0).tensor("b", {16}, f32_id, 0).pad_to(32);
    expect_rejected(dir, same.zeros(64),
                    "tensor 'b': data [0, +64) overlaps the data of tensor 'a'");
    raw_gguf partly; // b starts inside a, declared first
    partly.header(2, 0).tensor("b", {16}, f32_id, 32).tensor("a", {16}, f32_id, 0).pad_to(32);
    expect_rejected(dir, partly.zeros(96), "overlaps the data of tensor 'a'");
    raw_gguf apart; // adjacent, and an empty tensor anywhere: accepted
    apart.header(3, 0)
        .tensor("a", {16}, f32_id, 0)
        .tensor("b", {16}, f32_id, 64)
        .tensor("e", {0}, f32_id, 32)
        .pad_to(32)
        .zeros(128);
    test::save(dir + "/apart.gguf", apart.b);
    CHECK(gguf::file::open(dir + "/apart.gguf")->tensors().size() == 3);
}

TEST_CASE("metadata arrays of any size take no memory beyond the file's bytes") {
    const std::string dir = test::scratch_dir("gguf_metadata_arrays");
    const uint64_t n = uint64_t{16} << 20; // 16 Mi u8 elements
    raw_gguf big;
    big.header(0, 3).str("bytes").u32(9).u32(0).u64(n).zeros(n);
    big.str("strings").u32(9).u32(8).u64(1u << 20).zeros(size_t{8} << 20); // 1 Mi empty strings
    big.str("ints").u32(9).u32(5).u64(1u << 20).zeros(size_t{4} << 20);
    test::save(dir + "/big.gguf", big.b);
    const auto f = gguf::file::open(dir + "/big.gguf");
    REQUIRE(f->metadata().size() == 3);
    CHECK(std::get<gguf::array_value>(f->find("bytes")->data).size() == n);
    CHECK(std::get<gguf::array_value>(f->find("strings")->data).size() == 1u << 20);
    CHECK(f->get_i32_array("ints").size() == 1u << 20);
}

// Each key costs an entry and a tree node beyond its bytes: a file of tiny keys is refused once
// those pass the 8 MiB the reader allows beyond the bytes of the metadata (reader.cpp).
TEST_CASE(
    "metadata whose entries would outgrow its bytes by 8 MiB is refused before it is parsed") {
    const std::string dir = test::scratch_dir("gguf_metadata_memory");
    auto tiny_keys = [](uint64_t n) {
        raw_gguf r;
        r.header(0, n);
        for (uint64_t i = 0; i < n; ++i)
            r.str(std::to_string(i)).u32(0).u8(0);
        return r;
    };
    // Their entries alone pass the allowance: refused before the entries are reserved.
    expect_rejected(dir, tiny_keys(100000), "n_kv would bring the parsed metadata to more than");
    // The entries fit, the keys' tree nodes do not.
    expect_rejected(dir, tiny_keys(60000), "key would bring the parsed metadata to more than");
    test::save(dir + "/fits.gguf", tiny_keys(20000).b);
    CHECK(gguf::file::open(dir + "/fits.gguf")->metadata().size() == 20000);
}

} // namespace
