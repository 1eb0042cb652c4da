// GGUF writer/reader round trips, typed getters, and the real shared vocabulary files.
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <type_traits>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "gguf_test_util.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

namespace {

using namespace pi;
using gguf::array_value;
using gguf::value;
using gguf::value_type;
using element = decltype(array_value::elems)::value_type;

element as_element(const value& v) {
    return std::visit(
        [](const auto& x) -> element {
            if constexpr (std::is_same_v<std::decay_t<decltype(x)>, array_value>) {
                FAIL("array where a scalar was expected");
                return element{};
            } else {
                return x;
            }
        },
        v.data);
}

void check_same(const std::string& key, const value& want, const value* got) {
    INFO("key: " << key);
    REQUIRE(got != nullptr);
    REQUIRE(got->type == want.type);
    if (want.type != value_type::array) {
        CHECK(as_element(*got) == as_element(want));
        return;
    }
    const auto& a = std::get<array_value>(want.data);
    const auto& b = std::get<array_value>(got->data);
    CHECK(b.elem_type == a.elem_type);
    CHECK(b.elems == a.elems);
}

value arr(value_type t, std::vector<element> elems) {
    return value{value_type::array, array_value{t, std::move(elems)}};
}

std::vector<uint8_t> f32_bytes(std::initializer_list<float> xs) {
    std::vector<uint8_t> out(xs.size() * 4);
    std::memcpy(out.data(), std::data(xs), out.size());
    return out;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<uint8_t>(seed + i * 7);
    return out;
}

// Every value type at its extremes, and an array of each element type.
std::vector<std::pair<std::string, value>> every_value() {
    using L8 = std::numeric_limits<uint8_t>;
    using L64 = std::numeric_limits<int64_t>;
    const std::string with_nul("a\0b\xe2\x96\x81", 6);
    return {
        {"t.u8", {value_type::u8, uint64_t{L8::max()}}},
        {"t.i8", {value_type::i8, int64_t{-128}}},
        {"t.u16", {value_type::u16, uint64_t{65535}}},
        {"t.i16", {value_type::i16, int64_t{-32768}}},
        {"t.u32", {value_type::u32, uint64_t{4294967295u}}},
        {"t.i32", {value_type::i32, int64_t{std::numeric_limits<int32_t>::min()}}},
        {"t.f32", {value_type::f32, -1.5}},
        {"t.bool", {value_type::boolean, true}},
        {"t.string", {value_type::string, with_nul}},
        {"t.empty_string", {value_type::string, std::string()}},
        {"t.u64", {value_type::u64, std::numeric_limits<uint64_t>::max()}},
        {"t.i64", {value_type::i64, L64::min()}},
        {"t.f64", {value_type::f64, 0.1}},
        {"a.u8", arr(value_type::u8, {uint64_t{0}, uint64_t{255}})},
        {"a.i8", arr(value_type::i8, {int64_t{-128}, int64_t{127}})},
        {"a.u16", arr(value_type::u16, {uint64_t{1}, uint64_t{65535}})},
        {"a.i16", arr(value_type::i16, {int64_t{-32768}, int64_t{32767}})},
        {"a.u32", arr(value_type::u32, {uint64_t{7}, uint64_t{4294967295u}})},
        {"a.i32", arr(value_type::i32, {int64_t{-5}, int64_t{2147483647}})},
        {"a.f32", arr(value_type::f32, {0.25, -3.0, 1048576.0})},
        {"a.bool", arr(value_type::boolean, {true, false, true})},
        {"a.string", arr(value_type::string, {std::string(), std::string("a"), with_nul})},
        {"a.u64", arr(value_type::u64, {std::numeric_limits<uint64_t>::max()})},
        {"a.i64", arr(value_type::i64, {L64::min(), L64::max()})},
        {"a.f64", arr(value_type::f64, {0.1, -1e300})},
        {"a.empty", arr(value_type::u32, {})},
    };
}

TEST_CASE("every metadata value type and array type survives a write and read") {
    const std::string dir = test::scratch_dir("gguf_values");
    const auto values = every_value();
    gguf::writer w(false);
    for (const auto& [k, v] : values)
        w.set(k, v);
    w.write(dir + "/values.gguf");

    const auto f = gguf::file::open(dir + "/values.gguf");
    CHECK(f->version() == 3);
    CHECK_FALSE(f->sparse());
    CHECK(f->alignment() == 32);
    CHECK(f->find("general.alignment") == nullptr);
    CHECK(f->tensors().empty());
    REQUIRE(f->metadata().size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) {
        CHECK(f->metadata()[i].first == values[i].first); // insertion order kept
        check_same(values[i].first, values[i].second, f->find(values[i].first));
    }
}

TEST_CASE("f32 values are stored as float and read back as the nearest float") {
    const std::string dir = test::scratch_dir("gguf_f32");
    gguf::writer w(false);
    w.set_f32("x", 0.1f);
    w.set("y", value{value_type::f32, 0.1}); // a double narrowed on write
    w.write(dir + "/f.gguf");
    const auto f = gguf::file::open(dir + "/f.gguf");
    CHECK(std::get<double>(f->find("x")->data) == static_cast<double>(0.1f));
    CHECK(std::get<double>(f->find("y")->data) == static_cast<double>(0.1f));
    CHECK(f->get_f32("x") == 0.1f);
}

TEST_CASE("typed getters convert fitting integers and reject other types naming the key") {
    const std::string dir = test::scratch_dir("gguf_getters");
    gguf::writer w(false);
    w.set("small", value{value_type::u8, uint64_t{200}});
    w.set("neg", value{value_type::i32, int64_t{-3}});
    w.set("big", value{value_type::u64, uint64_t{1} << 40});
    w.set_u32("u32", 7);
    w.set_i32("i32", -9);
    w.set_u64("u64", 1234567890123ull);
    w.set_f32("f32", 2.5f);
    w.set("f64", value{value_type::f64, 0.5});
    w.set_bool("flag", true);
    w.set_string("name", "tiny");
    w.set_string_array("tokens", {"<unk>", "<s>", "\xe2\x96\x81the"});
    const float scores[] = {0.f, -1.25f, 3.5f};
    w.set_f32_array("scores", scores);
    const int32_t types[] = {2, 3, 1};
    w.set_i32_array("types", types);
    w.set("u8s", arr(value_type::u8, {uint64_t{1}, uint64_t{255}}));
    w.set("too_big", arr(value_type::u64, {uint64_t{1} << 40}));
    w.write(dir + "/g.gguf");
    const auto f = gguf::file::open(dir + "/g.gguf");

    CHECK(f->get_u32("small") == 200);
    CHECK(f->get_u32("u32") == 7);
    CHECK(f->get_u32("absent", 42) == 42);
    CHECK(f->get_u64("big", 0) == (uint64_t{1} << 40));
    CHECK(f->get_u64("u64", 0) == 1234567890123ull);
    CHECK(f->get_i32("neg", 0) == -3);
    CHECK(f->get_i32("i32", 0) == -9);
    CHECK(f->get_i32("small", 0) == 200);
    CHECK(f->get_f32("f32") == 2.5f);
    CHECK(f->get_f32("f64") == 0.5f);
    CHECK(f->get_f32("absent", 1.5f) == 1.5f);
    CHECK(f->get_bool("flag", false));
    CHECK(f->get_bool("absent", true));
    CHECK(f->get_string("name") == "tiny");
    CHECK(f->get_string("absent", "dflt") == "dflt");
    CHECK(f->get_string_array("tokens") ==
          std::vector<std::string>{"<unk>", "<s>", "\xe2\x96\x81the"});
    CHECK(f->get_f32_array("scores") == std::vector<float>{0.f, -1.25f, 3.5f});
    CHECK(f->get_i32_array("types") == std::vector<int32_t>{2, 3, 1});
    CHECK(f->get_i32_array("u8s") == std::vector<int32_t>{1, 255});
    CHECK(f->get_f32_array("absent").empty());
    CHECK(f->get_i32_array("absent").empty());

    auto expect_format = [](auto&& call, std::string_view word) {
        try {
            call();
            FAIL_CHECK("no error; expected one naming '" << word << "'");
        } catch (const error& e) {
            INFO("message: " << e.what());
            CHECK(e.code() == status::format);
            CHECK(std::string(e.what()).find(word) != std::string::npos);
        }
    };
    expect_format([&] { f->get_u32("neg"); }, "neg");
    expect_format([&] { f->get_u32("big"); }, "big");
    expect_format([&] { f->get_u32("name"); }, "name");
    expect_format([&] { f->get_u32("absent"); }, "absent");
    expect_format([&] { f->get_i32("u64", 0); }, "u64");
    expect_format([&] { f->get_f32("u32"); }, "u32");
    expect_format([&] { f->get_f32("absent"); }, "absent");
    expect_format([&] { f->get_bool("u32", false); }, "u32");
    expect_format([&] { f->get_string("u32"); }, "u32");
    expect_format([&] { f->get_string("absent"); }, "absent");
    expect_format([&] { f->get_string_array("scores"); }, "scores");
    expect_format([&] { f->get_string_array("absent"); }, "absent");
    expect_format([&] { f->get_f32_array("tokens"); }, "tokens");
    expect_format([&] { f->get_i32_array("scores"); }, "scores");
    expect_format([&] { f->get_i32_array("too_big"); }, "too_big");
}

TEST_CASE("set replaces an existing key in place") {
    const std::string dir = test::scratch_dir("gguf_replace");
    gguf::writer w(false);
    w.set_u32("a", 1);
    w.set_string("b", "x");
    w.set_u32("a", 2);
    w.write(dir + "/r.gguf");
    const auto f = gguf::file::open(dir + "/r.gguf");
    REQUIRE(f->metadata().size() == 2);
    CHECK(f->metadata()[0].first == "a");
    CHECK(f->get_u32("a") == 2);
}

TEST_CASE("tensors keep name, shape, type, data and aligned offsets") {
    const std::string dir = test::scratch_dir("gguf_tensors");
    for (const uint32_t alignment : {32u, 64u}) {
        INFO("alignment " << alignment);
        gguf::writer w(false, alignment);
        w.set_string("general.architecture", "llama");
        const int64_t d_f32[] = {3, 2};
        const int64_t d_q4[] = {64, 2};
        const int64_t d_i32[] = {5};
        const int64_t d_f16[] = {2, 1, 3, 2};
        const auto f32_data = f32_bytes({1, 2, 3, 4, 5, -6});
        w.add_tensor("a.weight", ggml_type::f32, d_f32, f32_data);
        w.add_tensor("q.weight", ggml_type::q4_0, d_q4, pattern(2 * 2 * 18, 3));
        w.add_tensor("idx", ggml_type::i32, d_i32, pattern(20, 9));
        w.add_tensor("h", ggml_type::f16, d_f16, pattern(24, 1));
        const std::string path = dir + "/t" + std::to_string(alignment) + ".gguf";
        w.write(path);

        const auto f = gguf::file::open(path);
        CHECK(f->alignment() == alignment);
        CHECK(f->data_offset() % alignment == 0);
        if (alignment == 32) {
            CHECK(f->find("general.alignment") == nullptr);
        } else {
            REQUIRE(f->find("general.alignment") != nullptr);
            CHECK(f->find("general.alignment")->type == value_type::u32);
            CHECK(f->get_u32("general.alignment") == alignment);
        }
        REQUIRE(f->tensors().size() == 4);
        CHECK(f->tensors()[0].name == "a.weight");
        CHECK(f->tensors()[3].name == "h");
        const gguf::tensor_info* a = f->find_tensor("a.weight");
        REQUIRE(a != nullptr);
        CHECK(a->n_dims == 2);
        CHECK(a->ne[0] == 3);
        CHECK(a->ne[1] == 2);
        CHECK(a->ne[2] == 1);
        CHECK(a->type == ggml_type::f32);
        CHECK(a->n_elements() == 6);
        CHECK(a->n_bytes == 24);
        CHECK(std::equal(f32_data.begin(), f32_data.end(), a->data));
        const gguf::tensor_info* q = f->find_tensor("q.weight");
        REQUIRE(q != nullptr);
        CHECK(q->type == ggml_type::q4_0);
        CHECK(q->n_bytes == 72);
        const auto q_data = pattern(72, 3);
        CHECK(std::equal(q_data.begin(), q_data.end(), q->data));
        const gguf::tensor_info* h = f->find_tensor("h");
        REQUIRE(h != nullptr);
        CHECK(h->n_dims == 4);
        CHECK(h->ne[3] == 2);
        CHECK(h->n_elements() == 12);
        for (const auto& t : f->tensors()) {
            CHECK(t.offset % alignment == 0);
            CHECK(t.data == f->bytes().data() + f->data_offset() + t.offset);
        }
        CHECK(f->find_tensor("missing") == nullptr);
        CHECK(f->bytes().size() % alignment == 0); // the last tensor is padded too
    }
}

TEST_CASE("the PWRI magic marks a sparse file and GGUF a dense one") {
    const std::string dir = test::scratch_dir("gguf_magic");
    for (const bool sparse : {false, true}) {
        gguf::writer w(sparse);
        w.set_string("general.architecture", "llama");
        const int64_t dims[] = {4};
        w.add_tensor("x", ggml_type::f32, dims, f32_bytes({1, 2, 3, 4}));
        const std::string path = dir + (sparse ? "/s.gguf" : "/d.gguf");
        w.write(path);
        const auto bytes = test::load(path);
        REQUIRE(bytes.size() > 8);
        CHECK(std::string(bytes.begin(), bytes.begin() + 4) == (sparse ? "PWRI" : "GGUF"));
        CHECK(bytes[4] == 3); // version 3, little-endian
        const auto f = gguf::file::open(path);
        CHECK(f->sparse() == sparse);
        CHECK(f->get_string("general.architecture") == "llama");
    }
}

TEST_CASE("general.alignment read as u64 is honoured") {
    const std::string dir = test::scratch_dir("gguf_align_u64");
    test::raw_gguf r;
    r.header(1, 1).str("general.alignment").u32(10).u64(128);
    r.tensor("t", {4}, 0, 0).pad_to(128).zeros(16).pad_to(128);
    test::save(dir + "/a.gguf", r.b);
    const auto f = gguf::file::open(dir + "/a.gguf");
    CHECK(f->alignment() == 128);
    CHECK(f->data_offset() == 128);
    CHECK(f->get_u64("general.alignment", 0) == 128);
}

TEST_CASE("writer rejects bad tensors, values and alignments with invalid_argument") {
    auto expect_invalid = [](auto&& call) {
        try {
            call();
            FAIL_CHECK("no error");
        } catch (const error& e) {
            CHECK(e.code() == status::invalid_argument);
        }
    };
    gguf::writer w(false);
    const int64_t d4[] = {4};
    const int64_t d5[] = {1, 1, 1, 1, 1};
    const int64_t d_neg[] = {-4};
    const int64_t d_q[] = {16};
    w.add_tensor("ok", ggml_type::f32, d4, std::vector<uint8_t>(16));
    expect_invalid([&] { w.add_tensor("short", ggml_type::f32, d4, std::vector<uint8_t>(15)); });
    expect_invalid([&] { w.add_tensor("ok", ggml_type::f32, d4, std::vector<uint8_t>(16)); });
    expect_invalid([&] { w.add_tensor("d5", ggml_type::f32, d5, std::vector<uint8_t>(4)); });
    expect_invalid([&] { w.add_tensor("neg", ggml_type::f32, d_neg, {}); });
    expect_invalid([&] { w.add_tensor("q", ggml_type::q4_0, d_q, std::vector<uint8_t>(9)); });
    expect_invalid([&] { w.add_tensor("bad", static_cast<ggml_type>(4), d4, {}); });
    expect_invalid([&] { w.set("k", value{value_type::u8, uint64_t{256}}); });
    expect_invalid([&] { w.set("k", value{value_type::i8, int64_t{-129}}); });
    expect_invalid([&] { w.set("k", value{value_type::u32, std::string("x")}); });
    expect_invalid([&] { w.set("k", arr(value_type::array, {})); });
    expect_invalid([&] { w.set("k", arr(value_type::u16, {uint64_t{70000}})); });
    expect_invalid([&] { w.set_u32("general.alignment", 64); });
    expect_invalid([] { gguf::writer bad(false, 48); });
    expect_invalid([] { gguf::writer bad(false, 0); });
}

TEST_CASE("a failed write throws io and leaves no temporary file") {
    const std::string dir = test::scratch_dir("gguf_write_fail");
    gguf::writer w(false);
    w.set_u32("a", 1);
    try {
        w.write(dir + "/no/such/dir/x.gguf");
        FAIL_CHECK("wrote into a missing directory");
    } catch (const error& e) {
        CHECK(e.code() == status::io);
    }
    std::filesystem::create_directory(dir + "/occupied"); // rename onto a directory fails
    try {
        w.write(dir + "/occupied");
        FAIL_CHECK("replaced a directory");
    } catch (const error& e) {
        CHECK(e.code() == status::io);
        CHECK(std::string(e.what()).find("occupied") != std::string::npos);
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
    w.write(dir + "/ok.gguf");
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
    CHECK(gguf::file::open(dir + "/ok.gguf")->get_u32("a") == 1);
}

TEST_CASE("the fixture's vocabulary-only file loads: tokenizer keys and no tensors") {
    const auto f = gguf::file::open(test::fixture_vocab_path());
    CHECK(f->version() == 3);
    CHECK_FALSE(f->sparse());
    CHECK(f->tensors().empty());
    CHECK(f->get_string("general.architecture") == "llama");
    CHECK(f->get_string("general.name") == "relu-llama-kjv");
    CHECK(f->get_string("tokenizer.ggml.model") == "llama");
    const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 4096);
    CHECK(tokens[0] == "<unk>");
    CHECK(tokens[1] == "<s>");
    CHECK(tokens[2] == "</s>");
    CHECK(tokens[13] == "<0x0A>");
    CHECK(f->get_f32_array("tokenizer.ggml.scores").size() == 4096);
    CHECK(f->get_i32_array("tokenizer.ggml.token_type").size() == 4096);
    CHECK(f->get_u32("tokenizer.ggml.bos_token_id") == 1);
    CHECK(f->get_u32("tokenizer.ggml.eos_token_id") == 2);
    CHECK(f->get_u32("tokenizer.ggml.unknown_token_id") == 0);
    for (const auto& [key, value] : f->metadata())
        CHECK_MESSAGE((key.starts_with("tokenizer.") || key.starts_with("general.")), key);
}

TEST_CASE("the Llama SPM vocabulary file of the tokenizer vectors loads") {
    if (!test::require_vector_file("ggml-vocab-llama-spm.gguf")) return;
    const auto f = gguf::file::open(test::vector_data_dir() + "/ggml-vocab-llama-spm.gguf");
    CHECK(f->version() == 3);
    CHECK_FALSE(f->sparse());
    CHECK(f->tensors().empty());
    CHECK(f->get_string("general.architecture") == "llama");
    CHECK(f->get_string("tokenizer.ggml.model") == "llama");
    const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 32000);
    CHECK(tokens[0] == "<unk>");
    CHECK(tokens[1] == "<s>");
    CHECK(tokens[2] == "</s>");
    CHECK(f->get_f32_array("tokenizer.ggml.scores").size() == 32000);
    CHECK(f->get_i32_array("tokenizer.ggml.token_type").size() == 32000);
    CHECK(f->get_u32("tokenizer.ggml.bos_token_id") == 1);
    CHECK(f->get_u32("tokenizer.ggml.eos_token_id") == 2);
    CHECK(f->get_u32("tokenizer.ggml.unknown_token_id") == 0);
}

TEST_CASE("the Falcon BPE vocabulary file of the tokenizer vectors loads") {
    if (!test::require_vector_file("ggml-vocab-falcon.gguf")) return;
    const auto f = gguf::file::open(test::vector_data_dir() + "/ggml-vocab-falcon.gguf");
    CHECK((f->version() == 2 || f->version() == 3));
    CHECK(f->tensors().empty());
    CHECK(f->get_string("general.architecture") == "falcon");
    CHECK(f->get_string("tokenizer.ggml.model") == "gpt2");
    CHECK(f->get_string_array("tokenizer.ggml.tokens").size() == 65024);
    CHECK_FALSE(f->get_string_array("tokenizer.ggml.merges").empty());
    CHECK(f->get_u32("tokenizer.ggml.bos_token_id") == 11);
}

} // namespace
