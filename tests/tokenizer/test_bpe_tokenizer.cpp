// Byte-level BPE on a hand-made vocabulary: merge order, the fallback of pieces that are no
// token, BOS, special tokens, decoding, the errors of loading one, and the time of a long word.
#include <chrono>
#include <cstdint>
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

constexpr int32_t a = 0, b = 1, c = 2, space = 3, ab = 4, bc = 5, space_a = 6, aa = 7, newline = 8,
                  question = 9, euro = 10, endoftext = 11;

// Texts in GPT-2's byte alphabet: "Ġ" (C4 A0) is the space, "Ċ" (C4 8A) the newline.
pi::vocab tiny_bpe() {
    pi::vocab v;
    v.model = pi::vocab_model::bpe;
    v.text = {"a",
              "b",
              "c",
              "\xC4\xA0",
              "ab",
              "bc",
              "\xC4\xA0"
              "a",
              "aa",
              "\xC4\x8A",
              ">>Q<<",
              "\xE2\x82\xAC",
              "<|endoftext|>"};
    v.type.assign(v.text.size(), pi::token_type::normal);
    v.type[question] = v.type[endoftext] = pi::token_type::control;
    v.bos = v.eos = endoftext;
    v.unk = -1;
    // "ab c" joins into "abc", which is no token.
    v.merges = {"a b", "b c", "\xC4\xA0 a", "a a", "ab c"};
    return v;
}

pi::error build_error(pi::vocab v) {
    return catch_error([&] { (void)pi::tokenizer::from_vocab(std::move(v)); });
}

bool mentions(const pi::error& e, const std::string& needle) {
    return std::string(e.what()).find(needle) != std::string::npos;
}

pi::gguf::writer bpe_writer() {
    const pi::vocab v = tiny_bpe();
    pi::gguf::writer w(false);
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", v.text);
    std::vector<int32_t> types;
    for (const pi::token_type t : v.type)
        types.push_back(static_cast<int32_t>(t));
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", v.merges);
    return w;
}

std::unique_ptr<pi::tokenizer> load(const pi::gguf::writer& w, const std::string& name) {
    const std::string path = pi::test::scratch_dir("bpe_" + name) + "/vocab.gguf";
    w.write(path);
    return pi::tokenizer::from_gguf(*pi::gguf::file::open(path));
}

} // namespace

TEST_CASE("the lowest-ranked pair merges first") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    CHECK(t->encode("ab", false) == ids{ab});
    CHECK(t->encode("bc", false) == ids{bc});
    CHECK(t->encode("cab", false) == ids{c, ab});
    pi::vocab v = tiny_bpe();
    std::swap(v.merges[0], v.merges[1]); // now "b c" outranks "a b"
    const auto swapped = pi::tokenizer::from_vocab(v);
    CHECK(swapped->encode("abca", false) == ids{a, bc, a});
}

TEST_CASE("between equal ranks the leftmost pair merges first") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    CHECK(t->encode("aaa", false) == ids{aa, a});
    CHECK(t->encode("aaaaa", false) == ids{aa, aa, a});
}

TEST_CASE("a merged piece that is no token is spelled by its bytes") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    // "a b" then "ab c" give "abc", which the vocabulary lacks.
    CHECK(t->encode("abc", false) == ids{a, b, c});
}

TEST_CASE("BPE adds no leading space and spaces attach to the word after them") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    CHECK(t->encode("a", false) == ids{a});
    CHECK(t->encode(" a", false) == ids{space_a});
    CHECK(t->encode("  a", false) == ids{space, space_a});
    CHECK(t->encode("a\n", false) == ids{a, newline});
    CHECK(t->encode("", false).empty());
}

TEST_CASE("a byte without a token is an error naming it, not a crash or a silent drop") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    const pi::error e = catch_error([&] { (void)t->encode("abz", false); });
    CHECK(e.code() == pi::status::invalid_argument);
    CHECK(mentions(e, "byte 0x7A"));
    const pi::error invalid = catch_error([&] { (void)t->encode("a\xFF", false); });
    CHECK(mentions(invalid, "byte 0xFF"));
}

TEST_CASE("BPE adds BOS only when tokenizer.ggml.add_bos_token asks for it") {
    pi::vocab v = tiny_bpe();
    const auto by_default = pi::tokenizer::from_vocab(v);
    CHECK_FALSE(by_default->uses_bos());
    CHECK(by_default->encode("ab", true) == ids{ab});
    CHECK(by_default->encode("", true).empty());
    v.add_bos_token = true;
    const auto with_bos = pi::tokenizer::from_vocab(v);
    CHECK(with_bos->uses_bos());
    CHECK(with_bos->encode("ab", true) == ids{endoftext, ab});
    CHECK(with_bos->encode("ab", false) == ids{ab});
    v.add_bos_token = false;
    CHECK(pi::tokenizer::from_vocab(v)->encode("ab", true) == ids{ab});
}

TEST_CASE("SPM still adds BOS when asked, whatever add_bos_token says") {
    pi::vocab v;
    v.text = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a"};
    v.add_bos_token = false;
    const auto t = pi::tokenizer::from_vocab(v);
    CHECK(t->uses_bos());
    CHECK(t->encode("a", true) == ids{1, 3, 4});
}

TEST_CASE("BPE special-token parsing cuts at control tokens and adds no space around them") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    CHECK(t->encode(">>Q<<ab<|endoftext|>", false, true) == ids{question, ab, endoftext});
    CHECK(t->encode("a<|endoftext|> a", false, true) == ids{a, endoftext, space_a});
    // Unparsed, '<' has no token: the text is not silently a control token.
    CHECK(catch_error([&] { (void)t->encode("<|endoftext|>", false); }).code() ==
          pi::status::invalid_argument);
}

TEST_CASE("BPE pieces map the byte alphabet back to bytes and decode keeps leading spaces") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    CHECK(t->piece(space_a) == " a");
    CHECK(t->piece(newline) == "\n");
    CHECK(t->piece(euro) == "\xE2\x82\xAC"); // not in the alphabet: kept as written
    CHECK(t->piece(endoftext).empty());      // control
    CHECK(t->vocabulary().newline == newline);
    const ids v{space, space_a, endoftext, ab};
    CHECK(pi::test::decode(*t, v) == "  aab");
    CHECK(pi::test::decode(*t, t->encode(" ab\n a", false)) == " ab\n a");
}

TEST_CASE("a piece of a multi-byte character is its bytes") {
    pi::vocab v = tiny_bpe();
    v.text.push_back("\xC3\xA2"); // U+00E2 stands for byte 0xE2 (the lead byte of "€")
    v.type.push_back(pi::token_type::normal);
    const auto t = pi::tokenizer::from_vocab(v);
    CHECK(t->piece(static_cast<int32_t>(v.text.size()) - 1) == "\xE2");
}

TEST_CASE("malformed merges are format errors naming the entry") {
    for (const std::string bad : {"ab", "a ", " a", "", "a"}) {
        CAPTURE(bad);
        pi::vocab v = tiny_bpe();
        v.merges.insert(v.merges.begin() + 2, bad);
        const pi::error e = build_error(v);
        CHECK(e.code() == pi::status::format);
        CHECK(mentions(e, "tokenizer.ggml.merges[2]"));
    }
    pi::vocab v = tiny_bpe();
    v.merges.clear();
    const pi::error e = build_error(v);
    CHECK(e.code() == pi::status::format);
    CHECK(mentions(e, "tokenizer.ggml.merges"));
}

TEST_CASE("a merge entry is split at its first space after the first character") {
    pi::vocab v = tiny_bpe();
    // Left " " (a raw space, never a symbol of an encoded text), right "a b": loads, and
    // changes nothing.
    v.merges.push_back("  a b");
    const auto t = pi::tokenizer::from_vocab(v);
    CHECK(t->encode("ab", false) == ids{ab});
}

TEST_CASE("a merge whose sides are not tokens still takes part") {
    pi::vocab v = tiny_bpe();
    // "ab c" gives the non-token "abc"; "abc a" gives "abca", a token.
    v.text.push_back("abca");
    v.type.push_back(pi::token_type::normal);
    v.merges.push_back("abc a");
    const auto t = pi::tokenizer::from_vocab(v);
    CHECK(t->encode("abca", false) == ids{static_cast<int32_t>(v.text.size()) - 1});
}

TEST_CASE("from_gguf reads a gpt2 vocabulary with BPE defaults") {
    const auto t = load(bpe_writer(), "defaults");
    CHECK(t->vocabulary().model == pi::vocab_model::bpe);
    CHECK(t->vocabulary().pre == pi::bpe_pre::falcon);
    CHECK(t->vocabulary().bos == 11);
    CHECK(t->vocabulary().eos == 11);
    CHECK(t->vocabulary().unk == -1);
    CHECK_FALSE(t->vocabulary().add_bos_token.has_value());
    CHECK(t->encode("cab ab", true) == ids{c, ab, space, ab});
}

TEST_CASE("from_gguf picks the pre-tokenizer from tokenizer.ggml.pre or the architecture") {
    pi::gguf::writer w = bpe_writer();
    w.set_string("general.architecture", "opt");
    CHECK(load(w, "opt")->vocabulary().pre == pi::bpe_pre::gpt2);
    w.set_string("tokenizer.ggml.pre", "falcon");
    CHECK(load(w, "pre_falcon")->vocabulary().pre == pi::bpe_pre::falcon);
    w.set_string("tokenizer.ggml.pre", "gpt-2");
    CHECK(load(w, "pre_gpt2")->vocabulary().pre == pi::bpe_pre::gpt2);
    w.set_string("tokenizer.ggml.pre", "qwen2");
    const pi::error e = catch_error([&] { (void)load(w, "pre_qwen2"); });
    CHECK(e.code() == pi::status::unsupported);
    CHECK(mentions(e, "\"qwen2\""));
}

TEST_CASE("from_gguf reads add_bos_token for BPE") {
    pi::gguf::writer w = bpe_writer();
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_u32("tokenizer.ggml.bos_token_id", endoftext);
    CHECK(load(w, "add_bos")->encode("ab", true) == ids{endoftext, ab});
}

TEST_CASE("from_gguf needs the merges of a gpt2 vocabulary") {
    pi::gguf::writer w(false);
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", tiny_bpe().text);
    const pi::error e = catch_error([&] { (void)load(w, "no_merges"); });
    CHECK(e.code() == pi::status::format);
    CHECK(mentions(e, "tokenizer.ggml.merges"));
    w.set_u32("tokenizer.ggml.merges", 3);
    const pi::error typed = catch_error([&] { (void)load(w, "merges_type"); });
    CHECK(typed.code() == pi::status::format);
    CHECK(mentions(typed, "tokenizer.ggml.merges"));
}

TEST_CASE("a 100 KB word encodes in well under a second") {
    const auto t = pi::tokenizer::from_vocab(tiny_bpe());
    const std::string word(100000, 'a');
    const auto start = std::chrono::steady_clock::now();
    const ids out = t->encode(word, false);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE("100000 'a': " << seconds * 1e3 << " ms");
    CHECK(out == ids(50000, aa));
    // Linear-ish work takes milliseconds; a quadratic pass over 1e5 symbols would take minutes.
    CHECK(seconds < 2.0);
}
