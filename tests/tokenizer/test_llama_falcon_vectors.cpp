// The tokenizers against the GGUF ecosystem's Llama (SPM) and Falcon (BPE) vectors, which live
// outside the repository (docs/test-data.md): each test skips where they are absent, and fails
// under CI=true.
#include <chrono>
#include <filesystem>
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

const char* const llama_vocab = "ggml-vocab-llama-spm.gguf";
const char* const falcon_vocab = "ggml-vocab-falcon.gguf";

std::string path_of(const std::string& file) {
    return (std::filesystem::path(pi::test::vector_data_dir()) / file).string();
}

// Loaded once: parsing 32000 tokens is the slowest step of this program.
const pi::tokenizer& llama() {
    static const std::unique_ptr<pi::tokenizer> t =
        pi::tokenizer::from_gguf(*pi::gguf::file::open(path_of(llama_vocab)));
    return *t;
}

const pi::tokenizer& falcon() {
    static const std::unique_ptr<pi::tokenizer> t =
        pi::tokenizer::from_gguf(*pi::gguf::file::open(path_of(falcon_vocab)));
    return *t;
}

} // namespace

TEST_CASE("llama vocabulary reproduces every shared test vector") {
    if (!pi::test::require_vector_file(llama_vocab)) return;
    const auto inputs = pi::test::read_inputs(path_of(std::string(llama_vocab) + ".inp"));
    const auto expected = pi::test::read_outputs(path_of(std::string(llama_vocab) + ".out"));
    REQUIRE(inputs.size() == 46);
    REQUIRE(expected.size() == inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(i);
        CAPTURE(inputs[i]);
        CHECK(llama().encode(inputs[i], false) == expected[i]);
    }
}

TEST_CASE("llama vocabulary header values and known encodings") {
    if (!pi::test::require_vector_file(llama_vocab)) return;
    const pi::tokenizer& t = llama();
    CHECK(t.n_tokens() == 32000);
    CHECK(t.vocabulary().bos == 1);
    CHECK(t.vocabulary().eos == 2);
    CHECK(t.vocabulary().unk == 0);
    CHECK(t.vocabulary().newline == 13);
    CHECK(t.encode(" ", false) == ids{259});
    CHECK(t.encode("Hello world", false) == ids{15043, 3186});
    CHECK(t.encode(" Hello", false) == ids{29871, 15043});
    CHECK(t.encode("Hello world", true) == ids{1, 15043, 3186});
    CHECK(t.encode("\xF0\x9F\x9A\x80", false) == ids{29871, 243, 162, 157, 131});
}

TEST_CASE("llama vocabulary parses its control tokens and ends generation at EOS only") {
    if (!pi::test::require_vector_file(llama_vocab)) return;
    const pi::tokenizer& t = llama();
    CHECK(t.encode("<s>Hello world</s>", false, true) == ids{1, 15043, 3186, 2});
    ids chat{1};
    const ids between = t.encode("[INST] Hello [/INST]", false);
    chat.insert(chat.end(), between.begin(), between.end());
    CHECK(t.encode("<s>[INST] Hello [/INST]", false, true) == chat);
    CHECK(t.vocabulary().eot == -1);
    CHECK(t.eog_tokens().size() == 1);
    CHECK(t.is_eog(2));
}

TEST_CASE("decode inverts encode on every shared llama input, with and without BOS") {
    if (!pi::test::require_vector_file(llama_vocab)) return;
    for (const std::string& text :
         pi::test::read_inputs(path_of(std::string(llama_vocab) + ".inp"))) {
        CAPTURE(text);
        CHECK(decode(llama(), llama().encode(text, false)) == text);
        CHECK(decode(llama(), llama().encode(text, true)) == text);
    }
}

TEST_CASE("falcon vocabulary reproduces every shared test vector") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    const auto inputs = pi::test::read_inputs(path_of(std::string(falcon_vocab) + ".inp"));
    const auto expected = pi::test::read_outputs(path_of(std::string(falcon_vocab) + ".out"));
    REQUIRE(inputs.size() == 46);
    REQUIRE(expected.size() == inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(i);
        CAPTURE(inputs[i]);
        CHECK(falcon().encode(inputs[i], false) == expected[i]);
        // add_bos asks for the BOS the vocabulary uses, and a BPE file without
        // tokenizer.ggml.add_bos_token uses none.
        CHECK(falcon().encode(inputs[i], true) == expected[i]);
    }
}

TEST_CASE("falcon vocabulary header values and known encodings") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    const pi::tokenizer& t = falcon();
    CHECK(t.vocabulary().model == pi::vocab_model::bpe);
    CHECK(t.vocabulary().pre == pi::bpe_pre::falcon);
    CHECK(t.n_tokens() == 65024);
    CHECK(t.vocabulary().merges.size() == 64784);
    CHECK(t.vocabulary().bos == 11);
    CHECK(t.vocabulary().eos == 11);
    CHECK(t.vocabulary().unk == -1);
    CHECK(t.vocabulary().newline == 193); // "\xC4\x8A", U+010A: byte 0x0A
    CHECK_FALSE(t.uses_bos());
    CHECK(t.encode(" ", false) == ids{204});
    CHECK(t.encode("Hello world", false) == ids{9856, 1079});
    CHECK(t.encode("\n", false) == ids{193});
    CHECK(t.piece(193) == "\n");
    CHECK(t.piece(204) == " ");
    CHECK(t.piece(11).empty()); // control
}

TEST_CASE("falcon vocabulary parses its control tokens and ends generation at <|endoftext|>") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    const pi::tokenizer& t = falcon();
    CHECK(t.encode("<|endoftext|>Hello world", false, true) == ids{11, 9856, 1079});
    CHECK(t.encode(">>QUESTION<<Hello world>>ANSWER<<", false, true) == ids{6, 9856, 1079, 5});
    // Without parsing, the texts are ordinary characters.
    CHECK(t.encode("<|endoftext|>", false).size() > 1);
    CHECK(t.vocabulary().eot == 11);
    CHECK(t.is_eog(11));
    CHECK(t.eog_tokens().size() == 1);
}

TEST_CASE("decode inverts encode on every shared falcon input") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    for (const std::string& text :
         pi::test::read_inputs(path_of(std::string(falcon_vocab) + ".inp"))) {
        CAPTURE(text);
        CHECK(decode(falcon(), falcon().encode(text, false)) == text);
    }
}

TEST_CASE("every normal falcon token decodes back from the encoding of its piece") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    const pi::tokenizer& t = falcon();
    size_t n_checked = 0, n_failed = 0;
    for (int32_t id = 0; id < t.n_tokens(); ++id) {
        if (t.vocabulary().type[id] != pi::token_type::normal) continue;
        const std::string p = t.piece(id);
        const std::string back = decode(t, t.encode(p, false));
        ++n_checked;
        if (back != p) {
            ++n_failed;
            CAPTURE(id);
            CHECK(back == p);
        }
    }
    CHECK(n_checked == 65012);
    CHECK(n_failed == 0);
}

TEST_CASE("falcon encodes every byte it has a token for, invalid UTF-8 included") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    const pi::tokenizer& t = falcon();
    // Falcon's vocabulary lacks the byte characters of 28 bytes, among them vertical tab (0x0B)
    // and bytes no valid UTF-8 holds (0xC0, 0xC1, 0xF5..0xFF).
    std::string spelled;
    std::vector<int> missing;
    for (int b = 0; b < 256; ++b) {
        const std::string one(1, static_cast<char>(b));
        const pi::status s = pi::test::code_of([&] { (void)t.encode(one, false); });
        if (s == pi::status::ok)
            spelled += one;
        else
            missing.push_back(b);
    }
    CHECK(missing.size() == 28);
    CHECK(decode(t, t.encode(spelled, false)) == spelled);
    const std::string invalid = "a\xC3(\xF4\x80 \xE2\x82 12345\xF0\x9F\x98";
    CHECK(decode(t, t.encode(invalid, false)) == invalid);
    std::mt19937 rng(7);
    for (int i = 0; i < 50; ++i) {
        const std::string text = pi::test::random_utf8(rng, 200);
        CAPTURE(text);
        CHECK(decode(t, t.encode(text, false)) == text);
    }
}

TEST_CASE("falcon names a byte it cannot spell instead of dropping it") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    const pi::error e =
        pi::test::catch_error([&] { (void)falcon().encode("tab\vvertical", false); });
    CHECK(e.code() == pi::status::invalid_argument);
    CHECK(std::string(e.what()).find("byte 0x0B") != std::string::npos);
}

TEST_CASE("falcon encodes 100 KB words and texts in linear-ish time") {
    if (!pi::test::require_vector_file(falcon_vocab)) return;
    const pi::tokenizer& t = falcon();
    std::mt19937 rng(11);
    const std::string texts[] = {std::string(100000, 'a'), std::string(100000, ' '),
                                 std::string(100000, '7'), pi::test::random_utf8(rng, 40000)};
    for (const std::string& text : texts) {
        const auto start = std::chrono::steady_clock::now();
        const pi::test::ids out = t.encode(text, false);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        MESSAGE(text.size() << " bytes -> " << out.size() << " tokens in " << seconds * 1e3
                            << " ms");
        CHECK(decode(t, out) == text);
        // Tens of milliseconds when linear-ish (seconds under a sanitizer on a loaded machine);
        // a quadratic pass takes minutes.
        CHECK(seconds < 15.0);
    }
}
