// GGUF writer/reader round trips, typed getters, and the real shared vocabulary files.
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>

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
using element = array_value::element;

// Arrays are compared element by element, decoded, besides in their encoding.
void check_same(const std::string& key, const value& want, const value* got) {
    INFO("key: " << key);
    REQUIRE(got != nullptr);
    REQUIRE(got->type == want.type);
    CHECK(got->data == want.data);
    if (want.type != value_type::array) return;
    const auto& a = std::get<array_value>(want.data);
    const auto& b = std::get<array_value>(got->data);
    CHECK(b.elem_type() == a.elem_type());
    REQUIRE(b.size() == a.size());
    CHECK(b.elements() == a.elements());
}

// `call` must throw pi::error(status::invalid_argument).
template <typename Call> void expect_invalid(Call&& call) {
    try {
        call();
        FAIL_CHECK("no error");
    } catch (const error& e) {
        CHECK(e.code() == status::invalid_argument);
    }
}

value arr(value_type t, std::vector<element> elems) {
    return value{value_type::array, array_value::from_elements(t, elems)};
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

// Bytes written as hex pairs ("00 ff").
std::vector<uint8_t> hex(std::string_view text) {
    std::vector<uint8_t> out;
    for (size_t i = 0; i + 1 < text.size(); i += 3)
        out.push_back(static_cast<uint8_t>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
    return out;
}

const std::string with_nul("a\0b\xe2\x96\x81", 6);

// An array of each element type at its extremes, with its encoding spelled out byte by byte.
struct array_case {
    std::string key;
    value_type type;
    std::vector<element> values;
    std::vector<uint8_t> encoding;
};

std::vector<array_case> array_cases() {
    using L64 = std::numeric_limits<int64_t>;
    const std::string_view nul = with_nul;
    return {
        {"a.u8", value_type::u8, {uint64_t{0}, uint64_t{255}}, hex("00 ff")},
        {"a.i8", value_type::i8, {int64_t{-128}, int64_t{127}}, hex("80 7f")},
        {"a.u16", value_type::u16, {uint64_t{1}, uint64_t{65535}}, hex("01 00 ff ff")},
        {"a.i16", value_type::i16, {int64_t{-32768}, int64_t{32767}}, hex("00 80 ff 7f")},
        {"a.u32",
         value_type::u32,
         {uint64_t{7}, uint64_t{4294967295u}},
         hex("07 00 00 00 ff ff ff ff")},
        {"a.i32",
         value_type::i32,
         {int64_t{-5}, int64_t{2147483647}},
         hex("fb ff ff ff ff ff ff 7f")},
        {"a.f32",
         value_type::f32,
         {0.25, -3.0, 1048576.0},
         hex("00 00 80 3e 00 00 40 c0 00 00 80 49")},
        {"a.bool", value_type::boolean, {true, false, true}, hex("01 00 01")},
        {"a.string",
         value_type::string,
         {std::string_view(), std::string_view("a"), nul},
         hex("00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 61 "
             "06 00 00 00 00 00 00 00 61 00 62 e2 96 81")},
        {"a.u64",
         value_type::u64,
         {std::numeric_limits<uint64_t>::max()},
         hex("ff ff ff ff ff ff ff ff")},
        {"a.i64",
         value_type::i64,
         {L64::min(), L64::max()},
         hex("00 00 00 00 00 00 00 80 ff ff ff ff ff ff ff 7f")},
        {"a.f64",
         value_type::f64,
         {0.1, -1e300},
         hex("9a 99 99 99 99 99 b9 3f 9c 75 00 88 3c e4 37 fe")},
        {"a.empty", value_type::u32, {}, {}},
    };
}

// Every value type at its extremes, and an array of each element type.
std::vector<std::pair<std::string, value>> every_value() {
    using L8 = std::numeric_limits<uint8_t>;
    using L64 = std::numeric_limits<int64_t>;
    std::vector<std::pair<std::string, value>> out = {
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
    };
    for (const array_case& c : array_cases())
        out.emplace_back(c.key, arr(c.type, c.values));
    return out;
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

TEST_CASE("every array element type is written in its encoding and read back to its values") {
    const std::string dir = test::scratch_dir("gguf_arrays");
    gguf::writer w(false);
    for (const array_case& c : array_cases())
        w.set(c.key, arr(c.type, c.values));
    w.write(dir + "/arrays.gguf");
    const auto f = gguf::file::open(dir + "/arrays.gguf");
    const auto bytes = f->bytes();
    for (const array_case& c : array_cases()) {
        INFO("key: " << c.key);
        const value* v = f->find(c.key);
        REQUIRE(v != nullptr);
        REQUIRE(v->type == value_type::array);
        const auto& a = std::get<array_value>(v->data);
        CHECK(a.elem_type() == c.type);
        CHECK(a.size() == c.values.size());
        CHECK(a.empty() == c.values.empty());
        // The parsed array views the file's bytes: these are the bytes the writer wrote.
        CHECK(std::vector<uint8_t>(a.wire().begin(), a.wire().end()) == c.encoding);
        if (!a.wire().empty()) {
            CHECK(a.wire().data() >= bytes.data());
            CHECK(a.wire().data() + a.wire().size() <= bytes.data() + bytes.size());
        }
        CHECK(a.elements() == c.values);
        std::vector<element> seen;
        a.for_each([&](const element& e) { seen.push_back(e); });
        CHECK(seen == c.values);
    }
    CHECK(f->get_string_array("a.string") == std::vector<std::string>{"", "a", with_nul});
    CHECK(f->get_f32_array("a.f32") == std::vector<float>{0.25f, -3.f, 1048576.f});
    CHECK(f->get_i32_array("a.i8") == std::vector<int32_t>{-128, 127});
    CHECK(f->get_i32_array("a.u16") == std::vector<int32_t>{1, 65535});
    CHECK(f->get_i32_array("a.i16") == std::vector<int32_t>{-32768, 32767});
    CHECK(f->get_i32_array("a.i32") == std::vector<int32_t>{-5, 2147483647});
    CHECK(f->get_i32_array("a.u8") == std::vector<int32_t>{0, 255});
    CHECK(f->get_i32_array("a.empty").empty());
    try {
        f->get_i32_array("a.i64");
        FAIL_CHECK("an i64 beyond i32 was converted");
    } catch (const error& e) {
        CHECK(e.code() == status::format);
        CHECK(std::string(e.what()).find("element 0 does not fit in i32") != std::string::npos);
    }
}

TEST_CASE("a string inside an array that runs past its bytes is a format error naming the key") {
    const std::string dir = test::scratch_dir("gguf_array_strings");
    const std::string bad = dir + "/bad.gguf";
    test::raw_gguf past; // the second of two strings declares 5 bytes, 2 follow
    past.header(0, 1).str("tokens").u32(9).u32(8).u64(2).str("ab").u64(5).bytes("xy", 2);
    test::save(bad, past.b);
    test::expect_open_error(bad,
                            "key 'tokens': element 1: string length 5 exceeds the 2 bytes that "
                            "remain (file truncated or corrupt) (at byte offset 64)");
    test::raw_gguf cut; // the second string's length is cut short
    cut.header(0, 1).str("tokens").u32(9).u32(8).u64(2).str("ab").zeros(7);
    test::save(bad, cut.b);
    test::expect_open_error(bad, "key 'tokens': element 1 runs past the end of the file");
    test::raw_gguf flags; // bools are 0 or 1
    flags.header(0, 1).str("flags").u32(9).u32(7).u64(3).u8(1).u8(0).u8(2);
    test::save(bad, flags.b);
    test::expect_open_error(bad, "key 'flags': element 2: bool value 2 is neither 0 nor 1");

    // Every cut through a written array of strings.
    gguf::writer w(false);
    w.set_u32("first", 1);
    w.set_string_array("tokens", {"<unk>", "", "\xe2\x96\x81the"});
    w.set_u32("last", 2);
    w.write(dir + "/full.gguf");
    const auto full = test::load(dir + "/full.gguf");
    const auto f = gguf::file::open(dir + "/full.gguf");
    const auto elements = std::get<array_value>(f->find("tokens")->data).wire();
    const auto begin = static_cast<size_t>(elements.data() - f->bytes().data());
    for (size_t n = begin; n < begin + elements.size(); ++n) {
        INFO("prefix of " << n << " bytes");
        test::save(bad, {full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)});
        test::expect_open_error(bad, "key 'tokens'");
    }
}

TEST_CASE("parsed arrays view the file; copies own their bytes, moves keep them") {
    const std::string dir = test::scratch_dir("gguf_array_views");
    gguf::writer w(false);
    w.set_string_array("s", {"x", "yy", "zzz"});
    w.write(dir + "/v.gguf");
    const std::vector<element> xyz = {std::string_view("x"), std::string_view("yy"),
                                      std::string_view("zzz")};
    array_value copy;
    CHECK(copy.empty());
    CHECK(copy.elem_type() == value_type::u8);
    {
        const auto f = gguf::file::open(dir + "/v.gguf");
        const auto& parsed = std::get<array_value>(f->find("s")->data);
        copy = parsed;
        CHECK(copy == parsed);
        CHECK(copy.wire().data() != parsed.wire().data());
        array_value moved(array_value::view(parsed.elem_type(), parsed.size(), parsed.wire()));
        const array_value viewed = std::move(moved);
        CHECK(viewed.wire().data() == parsed.wire().data());
        CHECK(moved.empty());
        CHECK(moved.wire().empty());
    }
    CHECK(copy.elements() == xyz); // the file is closed: the copy reads its own bytes
    const uint8_t* owned = copy.wire().data();
    array_value moved = std::move(copy);
    CHECK(moved.wire().data() == owned);
    copy = std::move(moved);
    CHECK(copy.wire().data() == owned);
    CHECK(copy.elements() == xyz);

    CHECK(copy.first(2).elements() == std::vector<element>(xyz.begin(), xyz.begin() + 2));
    CHECK(copy.first(0).empty());
    CHECK(copy.first(3) == copy);
    const int32_t ints[] = {4, -5, 6};
    CHECK(array_value::from_i32(ints).first(1).elements() == std::vector<element>{int64_t{4}});
    const float floats[] = {0.5f, -1.f};
    CHECK(array_value::from_f32(floats).elements() == std::vector<element>{0.5, -1.0});
    const std::string strings[] = {"a", ""};
    CHECK(array_value::from_strings(strings).elements() ==
          std::vector<element>{std::string_view("a"), std::string_view()});
}

TEST_CASE("arrays are made only of well-formed elements") {
    using L = std::vector<element>;
    expect_invalid([] { array_value::from_elements(value_type::u16, L{uint64_t{70000}}); });
    expect_invalid([] { array_value::from_elements(value_type::i8, L{int64_t{-129}}); });
    expect_invalid([] { array_value::from_elements(value_type::u8, L{int64_t{1}}); });
    expect_invalid([] { array_value::from_elements(value_type::i32, L{true}); });
    expect_invalid([] { array_value::from_elements(value_type::f32, L{uint64_t{1}}); });
    expect_invalid([] { array_value::from_elements(value_type::string, L{uint64_t{1}}); });
    expect_invalid([] { array_value::from_elements(value_type::boolean, L{std::string_view()}); });
    expect_invalid([] { array_value::from_elements(value_type::array, L{}); });
    expect_invalid([] { array_value::from_elements(static_cast<value_type>(13), L{}); });
    expect_invalid([] { array_value::from_elements(value_type::u8, L{uint64_t{1}}).first(2); });

    const auto one_string = hex("05 00 00 00 00 00 00 00 61");
    expect_invalid([&] { array_value::view(value_type::string, 1, one_string); });
    const auto bools = hex("01 02");
    expect_invalid([&] { array_value::view(value_type::boolean, 2, bools); });
    const auto odd = hex("01 00 02");
    expect_invalid([&] { array_value::view(value_type::u16, 2, odd); });
    expect_invalid([&] { array_value::view(value_type::u8, 2, odd); }); // a byte left over
    expect_invalid([&] { array_value::view(value_type::array, 0, {}); });

    const auto two = hex("01 00 02 00");
    const array_value u16 = array_value::view(value_type::u16, 2, two);
    CHECK(u16.elements() == L{uint64_t{1}, uint64_t{2}});
    CHECK(u16 != array_value::view(value_type::i16, 2, two));
    CHECK(u16 != array_value::view(value_type::u8, 4, two));
    CHECK(u16 == array_value::from_elements(value_type::u16, L{uint64_t{1}, uint64_t{2}}));
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
