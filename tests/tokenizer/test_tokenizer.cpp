// SPM tokenizer on hand-made vocabularies: the merge order, byte fallback without byte tokens, and
// the errors of building a vocabulary and of reading one from GGUF metadata.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer_vectors.hpp"

namespace {

using pi::test::catch_error;
using pi::test::ids;

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
