// The tokenizer on the really-trained fixture's own SentencePiece vocabulary
// (tests/data/relu-llama-kjv.vocab.gguf, docs/fixture.md): the ids the real sentencepiece library
// gives for KJV texts (goldens of scripts/fixture/tokenizer_goldens.py), round trips, byte
// fallback, decoding and the errors of out-of-range ids. docs/tokenizer.md has the rules.
#include <memory>
#include <random>
#include <string>

#include <doctest/doctest.h>

#include "gguf/gguf.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer_vectors.hpp"

namespace {

using pi::test::decode;
using pi::test::ids;

const pi::tokenizer& kjv() {
    static const std::unique_ptr<pi::tokenizer> t =
        pi::tokenizer::from_gguf(*pi::gguf::file::open(pi::test::fixture_vocab_path()));
    return *t;
}

// A few ids of the vocabulary, as sentencepiece names them.
constexpr int32_t space = 4024;   // "▁"
constexpr int32_t and_word = 300; // "▁And"
constexpr int32_t god = 395;      // "▁God"
constexpr int32_t newline = 13;   // "<0x0A>"

} // namespace

TEST_CASE("the fixture vocabulary reproduces sentencepiece's ids of every golden text") {
    const std::string vocab = pi::test::fixture_vocab_path();
    const auto inputs = pi::test::read_inputs(vocab + ".inp");
    const auto expected = pi::test::read_outputs(vocab + ".out");
    REQUIRE(inputs.size() == 35);
    REQUIRE(expected.size() == inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(i);
        CAPTURE(inputs[i]);
        CHECK(kjv().encode(inputs[i], false) == expected[i]);
    }
}

TEST_CASE("decode inverts encode on every golden text, with and without BOS") {
    for (const std::string& text : pi::test::read_inputs(pi::test::fixture_vocab_path() + ".inp")) {
        CAPTURE(text);
        CHECK(decode(kjv(), kjv().encode(text, false)) == text);
        CHECK(decode(kjv(), kjv().encode(text, true)) == text);
    }
}

TEST_CASE("the fixture vocabulary's header values and special ids") {
    const pi::tokenizer& t = kjv();
    CHECK(t.n_tokens() == 4096);
    CHECK(t.vocabulary().bos == 1);
    CHECK(t.vocabulary().eos == 2);
    CHECK(t.vocabulary().unk == 0);
    CHECK(t.vocabulary().newline == newline);
    CHECK(t.encode("And God said", false) == ids{and_word, god, 392});
}

TEST_CASE("add_bos prepends BOS, also to empty text") {
    CHECK(kjv().encode("And God said", true) == ids{1, and_word, god, 392});
    CHECK(kjv().encode("", true) == ids{1});
}

TEST_CASE("empty text encodes to nothing and decodes back") {
    CHECK(kjv().encode("", false).empty());
    CHECK(decode(kjv(), {}) == "");
    CHECK(decode(kjv(), {1}) == "");
}

TEST_CASE("decode inverts encode on random valid UTF-8") {
    std::mt19937 rng(1234);
    for (int i = 0; i < 300; ++i) {
        const std::string text = pi::test::random_utf8(rng, 1 + i % 40);
        CAPTURE(text);
        CHECK(decode(kjv(), kjv().encode(text, i % 2 == 0)) == text);
    }
}

TEST_CASE("long text encodes in one pass and round-trips") {
    std::mt19937 rng(99);
    std::string text;
    while (text.size() < 100'000)
        text += pi::test::random_utf8(rng, 64) + " and the LORD spake unto Moses ";
    const ids v = kjv().encode(text, false);
    CHECK(v.size() < text.size());
    CHECK(decode(kjv(), v) == text);
}

TEST_CASE("characters missing from the vocabulary fall back to byte tokens") {
    // U+1F680 (rocket) has no token: its four UTF-8 bytes are spelled <0xF0><0x9F><0x9A><0x80>,
    // byte b being token 3 + b.
    const ids v = kjv().encode("\xF0\x9F\x9A\x80", false);
    CHECK(v == ids{space, 243, 162, 157, 131});
    for (size_t i = 1; i < v.size(); ++i)
        CHECK(kjv().vocabulary().type[v[i]] == pi::token_type::byte);
    CHECK(kjv().piece(243) == "\xF0");
}

TEST_CASE("invalid UTF-8 is tokenised byte-wise without crashing") {
    CHECK(kjv().encode("\xFF", false) == ids{space, 3 + 0xFF});
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
        for (const int32_t id : kjv().encode(text, true)) {
            CHECK(id >= 0);
            CHECK(id < kjv().n_tokens());
        }
    }
    // A lead byte at the very end is clipped to what is left, then spelled as bytes.
    CHECK(decode(kjv(), kjv().encode("x\xE2\x96", false)) == "x\xE2\x96");
    std::mt19937 rng(7);
    for (int i = 0; i < 200; ++i) {
        std::string text(static_cast<size_t>(1 + i % 24), '\0');
        for (char& c : text)
            c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
        for (const int32_t id : kjv().encode(text, false))
            REQUIRE(id < kjv().n_tokens());
    }
}

TEST_CASE("pieces follow the token type") {
    const pi::tokenizer& t = kjv();
    CHECK(t.piece(0) == "\xE2\x96\x85"); // <unk>
    CHECK(t.piece(1) == "");             // <s>
    CHECK(t.piece(2) == "");             // </s>
    CHECK(t.piece(newline) == "\n");
    CHECK(t.piece(and_word) == " And");
    CHECK(t.piece(space) == " ");
}

TEST_CASE("decode drops one leading space of the first piece after an optional BOS") {
    CHECK(decode(kjv(), {and_word}) == "And");
    CHECK(decode(kjv(), {1, and_word}) == "And");
    CHECK(decode(kjv(), {and_word, and_word}) == "And And");
    CHECK(decode(kjv(), {1, and_word, 2, and_word}) == "And And");
    CHECK(decode(kjv(), {space, and_word}) == " And"); // only the first piece's space goes
}

TEST_CASE("out-of-range token ids throw invalid_argument naming the id") {
    for (const int32_t bad : {-1, 4096, 1 << 30}) {
        CAPTURE(bad);
        const pi::error e = pi::test::catch_error([&] { (void)kjv().piece(bad); });
        CHECK(e.code() == pi::status::invalid_argument);
        CHECK(std::string(e.what()).find(std::to_string(bad)) != std::string::npos);
        const ids v{and_word, bad};
        CHECK(pi::test::catch_error([&] { (void)decode(kjv(), v); }).code() ==
              pi::status::invalid_argument);
    }
}
