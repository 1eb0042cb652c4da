// SPM tokenizer: the shared Llama vectors, round trips, byte fallback, decoding and the errors of
// loading a vocabulary.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using ids = std::vector<int32_t>;

const char* const llama_vocab = "ggml-vocab-llama-spm.gguf";

std::string path_of(const std::string& file) {
    return (std::filesystem::path(pi::test::data_dir()) / file).string();
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Loaded once: parsing 32000 tokens is the slowest step of this program.
const pi::tokenizer& llama() {
    static const std::unique_ptr<pi::tokenizer> t =
        pi::tokenizer::from_gguf(*pi::gguf::file::open(path_of(llama_vocab)));
    return *t;
}

std::vector<std::string> read_inputs(const std::string& path) {
    const std::string all = read_all(path);
    const std::string terminator = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t end; (end = all.find(terminator, start)) != std::string::npos;) {
        out.push_back(all.substr(start, end - start));
        start = end + terminator.size();
    }
    REQUIRE(start == all.size()); // nothing after the last terminator
    return out;
}

std::vector<ids> read_outputs(const std::string& path) {
    std::istringstream in(read_all(path));
    std::vector<ids> out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        ids row;
        for (int32_t id; fields >> id;)
            row.push_back(id);
        out.push_back(row);
    }
    return out;
}

std::string decode(const pi::tokenizer& t, const ids& v) {
    return t.decode(v.data(), v.size());
}

void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Valid UTF-8 drawn from ASCII (spaces and newlines included), Latin-1, Cyrillic, CJK and emoji.
std::string random_utf8(std::mt19937& rng, size_t n_chars) {
    static constexpr uint32_t ranges[][2] = {
        {0x20, 0x7E},     {0x09, 0x0A},       {0xA0, 0xFF},  {0x400, 0x4FF},
        {0x4E00, 0x9FFF}, {0x1F300, 0x1F6FF}, {0x80, 0x7FF}, {0xE000, 0xFFFD},
    };
    std::uniform_int_distribution<size_t> pick_range(0, std::size(ranges) - 1);
    std::string s;
    for (size_t i = 0; i < n_chars; ++i) {
        const auto& r = ranges[pick_range(rng)];
        append_utf8(s, std::uniform_int_distribution<uint32_t>(r[0], r[1])(rng));
    }
    return s;
}

template <typename F> pi::error catch_error(F&& f) {
    try {
        f();
    } catch (const pi::error& e) {
        return e;
    }
    FAIL("expected a pi::error");
    return pi::error(pi::status::ok, "");
}

// A small vocabulary whose merges are easy to follow by hand.
pi::vocab tiny_vocab() {
    pi::vocab v;
    v.text = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c", "aa", "ab", "bc", "<0x7A>"};
    v.score = {0, 0, 0, -1, -1, -1, -1, -2, -3, -4, 0};
    v.type.assign(v.text.size(), pi::token_type::normal);
    v.type[0] = pi::token_type::unknown;
    v.type[1] = v.type[2] = pi::token_type::control;
    v.type[10] = pi::token_type::byte;
    return v;
}

} // namespace

TEST_CASE("llama vocabulary reproduces every shared test vector") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    const auto inputs = read_inputs(path_of(std::string(llama_vocab) + ".inp"));
    const auto expected = read_outputs(path_of(std::string(llama_vocab) + ".out"));
    REQUIRE(inputs.size() == 46);
    REQUIRE(expected.size() == inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(i);
        CAPTURE(inputs[i]);
        CHECK(llama().encode(inputs[i], false) == expected[i]);
    }
}

TEST_CASE("llama vocabulary header values and known encodings") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    const pi::tokenizer& t = llama();
    CHECK(t.n_tokens() == 32000);
    CHECK(t.vocabulary().bos == 1);
    CHECK(t.vocabulary().eos == 2);
    CHECK(t.vocabulary().unk == 0);
    CHECK(t.vocabulary().newline == 13);
    CHECK(t.encode(" ", false) == ids{259});
    CHECK(t.encode("Hello world", false) == ids{15043, 3186});
    CHECK(t.encode(" Hello", false) == ids{29871, 15043});
}

TEST_CASE("add_bos prepends BOS, also to empty text") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    CHECK(llama().encode("Hello world", true) == ids{1, 15043, 3186});
    CHECK(llama().encode("", true) == ids{1});
}

TEST_CASE("empty text encodes to nothing and decodes back") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    CHECK(llama().encode("", false).empty());
    CHECK(decode(llama(), {}) == "");
    CHECK(decode(llama(), {1}) == "");
}

TEST_CASE("decode inverts encode on every shared input, with and without BOS") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    for (const std::string& text : read_inputs(path_of(std::string(llama_vocab) + ".inp"))) {
        CAPTURE(text);
        CHECK(decode(llama(), llama().encode(text, false)) == text);
        CHECK(decode(llama(), llama().encode(text, true)) == text);
    }
}

TEST_CASE("decode inverts encode on random valid UTF-8") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    std::mt19937 rng(1234);
    for (int i = 0; i < 300; ++i) {
        const std::string text = random_utf8(rng, 1 + i % 40);
        CAPTURE(text);
        CHECK(decode(llama(), llama().encode(text, i % 2 == 0)) == text);
    }
}

TEST_CASE("long text encodes in one pass and round-trips") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    std::mt19937 rng(99);
    std::string text;
    while (text.size() < 100'000)
        text += random_utf8(rng, 64) + " the quick brown fox ";
    const ids v = llama().encode(text, false);
    CHECK(v.size() < text.size());
    CHECK(decode(llama(), v) == text);
}

TEST_CASE("characters missing from the vocabulary fall back to byte tokens") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    // U+1F680 (rocket) has no token: its four UTF-8 bytes are spelled <0xF0><0x9F><0x9A><0x80>.
    const ids v = llama().encode("\xF0\x9F\x9A\x80", false);
    CHECK(v == ids{29871, 243, 162, 157, 131});
    for (size_t i = 1; i < v.size(); ++i)
        CHECK(llama().vocabulary().type[v[i]] == pi::token_type::byte);
    CHECK(llama().piece(243) == "\xF0");
}

TEST_CASE("invalid UTF-8 is tokenised byte-wise without crashing") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    CHECK(llama().encode("\xFF", false) == ids{29871, 258});
    const std::string cases[] = {"\xC0",
                                 "\xFF\xFE",
                                 "a\xE2\x96",
                                 "\x80\x80\x80",
                                 "\xF0 x",
                                 std::string("\0\xC3", 2),
                                 "ab\xF4\x90\x80\x80",
                                 "\xED\xA0\x80"};
    for (const std::string& text : cases) {
        CAPTURE(text);
        for (const int32_t id : llama().encode(text, true)) {
            CHECK(id >= 0);
            CHECK(id < llama().n_tokens());
        }
    }
    // A lead byte at the very end is clipped to what is left, then spelled as bytes.
    CHECK(decode(llama(), llama().encode("x\xE2\x96", false)) == "x\xE2\x96");
    std::mt19937 rng(7);
    for (int i = 0; i < 200; ++i) {
        std::string text(static_cast<size_t>(1 + i % 24), '\0');
        for (char& c : text)
            c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
        for (const int32_t id : llama().encode(text, false))
            REQUIRE(id < llama().n_tokens());
    }
}

TEST_CASE("pieces follow the token type") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    const pi::tokenizer& t = llama();
    CHECK(t.piece(0) == "\xE2\x96\x85"); // <unk>
    CHECK(t.piece(1) == "");             // <s>
    CHECK(t.piece(2) == "");             // </s>
    CHECK(t.piece(13) == "\n");          // <0x0A>
    CHECK(t.piece(15043) == " Hello");
    CHECK(t.piece(259) == "  ");
}

TEST_CASE("decode drops one leading space of the first piece after an optional BOS") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    CHECK(decode(llama(), {15043}) == "Hello");
    CHECK(decode(llama(), {1, 15043}) == "Hello");
    CHECK(decode(llama(), {15043, 15043}) == "Hello Hello");
    CHECK(decode(llama(), {1, 15043, 2, 15043}) == "Hello Hello");
    CHECK(decode(llama(), {259, 15043}) == "  Hello"); // only one of two spaces goes
}

TEST_CASE("out-of-range token ids throw invalid_argument naming the id") {
    if (!pi::test::require_data_file(llama_vocab)) return;
    for (const int32_t bad : {-1, 32000, 1 << 30}) {
        CAPTURE(bad);
        const pi::error e = catch_error([&] { (void)llama().piece(bad); });
        CHECK(e.code() == pi::status::invalid_argument);
        CHECK(std::string(e.what()).find(std::to_string(bad)) != std::string::npos);
        const ids v{15043, bad};
        CHECK(catch_error([&] { (void)decode(llama(), v); }).code() ==
              pi::status::invalid_argument);
    }
}

TEST_CASE("a BPE (gpt2) vocabulary is reported as unsupported") {
    if (!pi::test::require_data_file("ggml-vocab-falcon.gguf")) return;
    const auto f = pi::gguf::file::open(path_of("ggml-vocab-falcon.gguf"));
    const pi::error e = catch_error([&] { (void)pi::tokenizer::from_gguf(*f); });
    CHECK(e.code() == pi::status::unsupported);
    CHECK(std::string(e.what()) ==
          "BPE tokenizer (tokenizer.ggml.model = gpt2) is not supported yet");
}

TEST_CASE("equal scores merge the leftmost pair first") {
    const auto t = pi::tokenizer::from_vocab(tiny_vocab());
    // "▁aaa": both "a a" pairs score the same; the left one wins, leaving a lone "a".
    CHECK(t->encode("aaa", false) == ids{3, 7, 4});
}

TEST_CASE("higher-scoring merges win over earlier ones") {
    pi::vocab v = tiny_vocab();
    CHECK(pi::tokenizer::from_vocab(v)->encode("abc", false) == ids{3, 8, 6}); // ab > bc
    v.score[9] = -1.5f;
    CHECK(pi::tokenizer::from_vocab(v)->encode("abc", false) == ids{3, 4, 9}); // bc > ab
}

TEST_CASE("a byte without a byte token becomes the unknown token") {
    const auto t = pi::tokenizer::from_vocab(tiny_vocab());
    CHECK(t->encode("z", false) == ids{3, 10}); // <0x7A> exists
    CHECK(t->encode("y", false) == ids{3, 0});  // <0x79> does not
    CHECK(t->vocabulary().newline == -1);
}

TEST_CASE("from_vocab fills absent scores and types") {
    pi::vocab v = tiny_vocab();
    v.score.clear();
    v.type.clear();
    const auto t = pi::tokenizer::from_vocab(v);
    CHECK(t->vocabulary().score == std::vector<float>(v.text.size(), 0.0f));
    CHECK(t->vocabulary().type[0] == pi::token_type::normal);
    CHECK(t->piece(3) == " ");
}

TEST_CASE("from_vocab rejects inconsistent vocabularies naming the key") {
    const auto check = [](pi::vocab v, const std::string& key) {
        CAPTURE(key);
        const pi::error e = catch_error([&] { (void)pi::tokenizer::from_vocab(std::move(v)); });
        CHECK(e.code() == pi::status::format);
        CHECK(std::string(e.what()).find(key) != std::string::npos);
    };
    pi::vocab v = tiny_vocab();
    v.score.pop_back();
    check(v, "tokenizer.ggml.scores");
    v = tiny_vocab();
    v.type.push_back(pi::token_type::normal);
    check(v, "tokenizer.ggml.token_type");
    v = tiny_vocab();
    v.type[4] = static_cast<pi::token_type>(7);
    check(v, "tokenizer.ggml.token_type[4]");
    v = tiny_vocab();
    v.type[5] = pi::token_type::byte; // "b" is not spelled <0xXX>
    check(v, "tokenizer.ggml.tokens[5]");
    v = tiny_vocab();
    v.score[6] = std::nanf("");
    check(v, "tokenizer.ggml.scores[6]");
    v = tiny_vocab();
    v.bos = 11;
    check(v, "tokenizer.ggml.bos_token_id");
    v = tiny_vocab();
    v.eos = -2;
    check(v, "tokenizer.ggml.eos_token_id");
    v = tiny_vocab();
    v.unk = 100;
    check(v, "tokenizer.ggml.unknown_token_id");
    v = tiny_vocab();
    v.sep = 11;
    check(v, "tokenizer.ggml.seperator_token_id");
    v = tiny_vocab();
    v.pad = 12;
    check(v, "tokenizer.ggml.padding_token_id");
    check(pi::vocab{}, "tokenizer.ggml.tokens");
}

namespace {

// tiny_vocab() under the tokenizer.ggml.* keys of a GGUF file.
pi::gguf::writer tiny_writer() {
    const pi::vocab v = tiny_vocab();
    pi::gguf::writer w(false);
    w.set_string("general.architecture", "llama");
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", v.text);
    w.set_f32_array("tokenizer.ggml.scores", v.score);
    std::vector<int32_t> types;
    for (const pi::token_type t : v.type)
        types.push_back(static_cast<int32_t>(t));
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    return w;
}

std::unique_ptr<pi::gguf::file> write_and_open(const pi::gguf::writer& w, const std::string& name) {
    const std::string path = pi::test::scratch_dir("tokenizer_" + name) + "/vocab.gguf";
    w.write(path);
    return pi::gguf::file::open(path);
}

pi::error load_error(const pi::gguf::writer& w, const std::string& name) {
    const auto f = write_and_open(w, name);
    return catch_error([&] { (void)pi::tokenizer::from_gguf(*f); });
}

bool mentions(const pi::error& e, const std::string& needle) {
    return std::string(e.what()).find(needle) != std::string::npos;
}

} // namespace

TEST_CASE("from_gguf reads a written vocabulary back") {
    pi::gguf::writer w = tiny_writer();
    w.set_i32("tokenizer.ggml.seperator_token_id", -1);
    w.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu); // -1 through an unsigned field
    const auto t = pi::tokenizer::from_gguf(*write_and_open(w, "roundtrip"));
    CHECK(t->vocabulary().text == tiny_vocab().text);
    CHECK(t->vocabulary().score == tiny_vocab().score);
    CHECK(t->vocabulary().type == tiny_vocab().type);
    CHECK(t->vocabulary().sep == -1);
    CHECK(t->vocabulary().pad == -1);
    CHECK(t->vocabulary().unk == 0); // absent: the SPM default
    CHECK(t->encode("aaa", false) == ids{3, 7, 4});
}

TEST_CASE("from_gguf defaults absent scores, types and special ids") {
    pi::gguf::writer w(false);
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", tiny_vocab().text);
    const auto t = pi::tokenizer::from_gguf(*write_and_open(w, "defaults"));
    CHECK(t->vocabulary().score == std::vector<float>(tiny_vocab().text.size(), 0.0f));
    CHECK(t->vocabulary().type[0] == pi::token_type::normal);
    CHECK(t->vocabulary().bos == 1);
    CHECK(t->vocabulary().eos == 2);
    CHECK(t->vocabulary().unk == 0);
}

TEST_CASE("from_gguf rejects an unknown tokenizer model naming the value") {
    pi::gguf::writer w = tiny_writer();
    w.set_string("tokenizer.ggml.model", "bert");
    const pi::error e = load_error(w, "model");
    CHECK(e.code() == pi::status::format);
    CHECK(mentions(e, "\"bert\""));
}

TEST_CASE("from_gguf checks array lengths, even of present empty arrays") {
    const struct {
        const char* name;
        std::function<void(pi::gguf::writer&)> edit;
        const char* key;
    } cases[] = {
        {"scores_empty", [](pi::gguf::writer& w) { w.set_f32_array("tokenizer.ggml.scores", {}); },
         "tokenizer.ggml.scores"},
        {"scores_short",
         [](pi::gguf::writer& w) {
             const float two[] = {1, 2};
             w.set_f32_array("tokenizer.ggml.scores", two);
         },
         "tokenizer.ggml.scores"},
        {"types_short",
         [](pi::gguf::writer& w) {
             const int32_t one[] = {1};
             w.set_i32_array("tokenizer.ggml.token_type", one);
         },
         "tokenizer.ggml.token_type"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        pi::gguf::writer w = tiny_writer();
        c.edit(w);
        const pi::error e = load_error(w, c.name);
        CHECK(e.code() == pi::status::format);
        CHECK(mentions(e, c.key));
    }
}

TEST_CASE("from_gguf rejects special ids outside the vocabulary naming the key") {
    pi::gguf::writer w = tiny_writer();
    w.set_u32("tokenizer.ggml.bos_token_id", 11);
    CHECK(mentions(load_error(w, "bos_range"), "tokenizer.ggml.bos_token_id"));
    w = tiny_writer();
    w.set_i32("tokenizer.ggml.unknown_token_id", -5);
    CHECK(mentions(load_error(w, "unk_negative"), "tokenizer.ggml.unknown_token_id"));
    w = tiny_writer();
    w.set_f32("tokenizer.ggml.eos_token_id", 2);
    const pi::error e = load_error(w, "eos_float");
    CHECK(e.code() == pi::status::format);
    CHECK(mentions(e, "tokenizer.ggml.eos_token_id"));
}

TEST_CASE("from_gguf needs the model and tokens keys") {
    pi::gguf::writer no_model(false);
    no_model.set_string_array("tokenizer.ggml.tokens", tiny_vocab().text);
    const pi::error e1 = load_error(no_model, "no_model");
    CHECK(e1.code() == pi::status::format);
    CHECK(mentions(e1, "tokenizer.ggml.model"));

    pi::gguf::writer no_tokens(false);
    no_tokens.set_string("tokenizer.ggml.model", "llama");
    const pi::error e2 = load_error(no_tokens, "no_tokens");
    CHECK(e2.code() == pi::status::format);
    CHECK(mentions(e2, "tokenizer.ggml.tokens"));
}
