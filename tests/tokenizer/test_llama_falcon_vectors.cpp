// The tokenizer against the GGUF ecosystem's Llama and Falcon vectors, which live outside the
// repository (docs/test-data.md): each test skips where they are absent, and fails under CI=true.
#include <filesystem>
#include <memory>
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

std::string path_of(const std::string& file) {
    return (std::filesystem::path(pi::test::vector_data_dir()) / file).string();
}

// Loaded once: parsing 32000 tokens is the slowest step of this program.
const pi::tokenizer& llama() {
    static const std::unique_ptr<pi::tokenizer> t =
        pi::tokenizer::from_gguf(*pi::gguf::file::open(path_of(llama_vocab)));
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

TEST_CASE("a BPE (gpt2) vocabulary is reported as unsupported") {
    if (!pi::test::require_vector_file("ggml-vocab-falcon.gguf")) return;
    const auto f = pi::gguf::file::open(path_of("ggml-vocab-falcon.gguf"));
    const pi::error e = pi::test::catch_error([&] { (void)pi::tokenizer::from_gguf(*f); });
    CHECK(e.code() == pi::status::unsupported);
    CHECK(std::string(e.what()) ==
          "BPE tokenizer (tokenizer.ggml.model = gpt2) is not supported yet");
}
