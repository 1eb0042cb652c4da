// Special-token parsing (encode's parse_special) and the end-of-generation tokens, on hand-made
// vocabularies (docs/tokenizer.md).
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

using pi::token_type;
using pi::test::ids;

constexpr int32_t unk = 0, bos = 1, eos = 2, space = 3, a = 4, b = 5, space_a = 6, im_start = 7,
                  im_end = 8, im = 9, inst = 10, ab = 11, space_ab = 12, empty_control = 13;

// Chat control tokens, a user-defined "<|im" inside both of them, and a control token without
// text, over a few SPM pieces.
pi::vocab chat_vocab() {
    pi::vocab v;
    v.text = {"<unk>",
              "<s>",
              "</s>",
              "\xE2\x96\x81",
              "a",
              "b",
              "\xE2\x96\x81"
              "a",
              "<|im_start|>",
              "<|im_end|>",
              "<|im",
              "[INST]",
              "ab",
              "\xE2\x96\x81"
              "ab",
              ""};
    v.score = {0, 0, 0, -1, -1, -1, -2, 0, 0, 0, 0, -3, -4, 0};
    v.type.assign(v.text.size(), token_type::normal);
    v.type[unk] = token_type::unknown;
    v.type[bos] = v.type[eos] = v.type[im_start] = v.type[im_end] = token_type::control;
    v.type[empty_control] = token_type::control;
    v.type[im] = v.type[inst] = token_type::user_defined;
    return v;
}

} // namespace

TEST_CASE("without parse_special the text of a special token is plain text") {
    const auto t = pi::tokenizer::from_vocab(chat_vocab());
    // "<", "s", ">" have no tokens and no byte tokens: each is the unknown token.
    CHECK(t->encode("<s>a", false) == ids{space, unk, unk, unk, a});
    CHECK(t->encode("<s>a", false, false) == t->encode("<s>a", false));
}

TEST_CASE("parse_special turns special-token texts into their ids") {
    const auto t = pi::tokenizer::from_vocab(chat_vocab());
    CHECK(t->encode("<s>a", false, true) == ids{bos, space_a});
    CHECK(t->encode("[INST]ab", false, true) == ids{inst, space_ab}); // user-defined
    CHECK(t->encode("<unk>", false, true) == ids{unk});               // unknown
    CHECK(t->encode("<s>", true, true) == ids{bos, bos}); // add_bos does not look at the text
    CHECK(t->encode("", true, true) == ids{bos});
    CHECK(t->encode("", false, true).empty());
}

TEST_CASE("every text between special tokens gets its own leading space") {
    const auto t = pi::tokenizer::from_vocab(chat_vocab());
    CHECK(t->encode("a<|im_start|>b", false, true) == ids{space_a, im_start, space, b});
    CHECK(t->encode("<s> </s>", false, true) == ids{bos, space, space, eos});
    CHECK(t->encode("<|im_start|><|im_end|>", false, true) == ids{im_start, im_end});
    CHECK(t->encode("ab</s>ab", false, true) == ids{space_ab, eos, space_ab});
}

TEST_CASE("a longer special token wins over a shorter one inside it") {
    const auto t = pi::tokenizer::from_vocab(chat_vocab());
    CHECK(t->encode("<|im_end|><|im", false, true) == ids{im_end, im});
    CHECK(t->encode("<|im<|im_start|>", false, true) == ids{im, im_start});
}

TEST_CASE("a shorter special token found after longer ones keeps the fragments before it") {
    const auto t = pi::tokenizer::from_vocab(chat_vocab());
    CHECK(t->encode("<|im_start|>ab</s><s>", false, true) == ids{im_start, space_ab, eos, bos});
    CHECK(t->encode("<|im_end|>a<|im_start|>ab</s>", false, true) ==
          ids{im_end, space_a, im_start, space_ab, eos});
}

TEST_CASE("the end-of-turn token is found by its text when the vocabulary names none") {
    const auto t = pi::tokenizer::from_vocab(chat_vocab());
    CHECK(t->vocabulary().eot == im_end);
    CHECK(t->is_eog(eos));
    CHECK(t->is_eog(im_end));
    CHECK_FALSE(t->is_eog(im_start));
    CHECK_FALSE(t->is_eog(bos));
    CHECK_FALSE(t->is_eog(-1));
    CHECK_FALSE(t->is_eog(1000));
    CHECK(std::vector<int32_t>(t->eog_tokens().begin(), t->eog_tokens().end()) == ids{eos, im_end});
}

TEST_CASE("a named EOT is kept, and the end texts still end a generation") {
    pi::vocab v = chat_vocab();
    v.eot = im_start;
    const auto t = pi::tokenizer::from_vocab(v);
    CHECK(t->vocabulary().eot == im_start);
    CHECK(t->is_eog(im_start));
    CHECK(t->is_eog(im_end));
    CHECK(t->is_eog(eos));
}

TEST_CASE("the EOT by text follows the order of the end texts; <|eom_id|> only ends") {
    pi::vocab v;
    v.text = {"<unk>", "<s>", "</s>", "<|endoftext|>", "<|eom_id|>", "<|eot_id|>", "x"};
    const auto t = pi::tokenizer::from_vocab(v);
    CHECK(t->vocabulary().eot == 5); // "<|eot_id|>" comes before "<|endoftext|>"
    for (const int32_t id : {2, 3, 4, 5})
        CHECK(t->is_eog(id));
    CHECK_FALSE(t->is_eog(6));
}

TEST_CASE("without end tokens EOS alone ends a generation, and none without EOS") {
    pi::vocab v;
    v.text = {"<unk>", "<s>", "</s>", "x"};
    const auto with_eos = pi::tokenizer::from_vocab(v);
    CHECK(with_eos->vocabulary().eot == -1);
    CHECK(with_eos->eog_tokens().size() == 1);
    CHECK(with_eos->is_eog(2));
    v.eos = -1;
    CHECK(pi::tokenizer::from_vocab(v)->eog_tokens().empty());
}

TEST_CASE("an EOT outside the vocabulary is a format error naming the key") {
    pi::vocab v = chat_vocab();
    v.eot = 99;
    const pi::error e = pi::test::catch_error([&] { (void)pi::tokenizer::from_vocab(v); });
    CHECK(e.code() == pi::status::format);
    CHECK(std::string(e.what()).find("tokenizer.ggml.eot_token_id") != std::string::npos);
}

namespace {

pi::gguf::writer chat_writer() {
    const pi::vocab v = chat_vocab();
    pi::gguf::writer w(false);
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", v.text);
    w.set_f32_array("tokenizer.ggml.scores", v.score);
    std::vector<int32_t> types;
    for (const token_type t : v.type)
        types.push_back(static_cast<int32_t>(t));
    w.set_i32_array("tokenizer.ggml.token_type", types);
    return w;
}

std::unique_ptr<pi::tokenizer> read_back(const pi::gguf::writer& w, const std::string& name) {
    const std::string path = pi::test::scratch_dir("special_tokens_" + name) + "/vocab.gguf";
    w.write(path);
    return pi::tokenizer::from_gguf(*pi::gguf::file::open(path));
}

} // namespace

TEST_CASE("from_gguf reads the EOT id and the chat template") {
    pi::gguf::writer w = chat_writer();
    w.set_u32("tokenizer.ggml.eot_token_id", im_start);
    w.set_string("tokenizer.chat_template", "{{ messages }}");
    const auto t = read_back(w, "eot");
    CHECK(t->vocabulary().eot == im_start);
    CHECK(t->vocabulary().chat_template == "{{ messages }}");

    const auto plain = read_back(chat_writer(), "plain");
    CHECK(plain->vocabulary().eot == im_end);
    CHECK(plain->vocabulary().chat_template.empty());
}

TEST_CASE("from_gguf rejects a chat template that is not a string, naming the key") {
    pi::gguf::writer w = chat_writer();
    w.set_u32("tokenizer.chat_template", 7);
    const pi::error e = pi::test::catch_error([&] { (void)read_back(w, "bad_template"); });
    CHECK(e.code() == pi::status::format);
    CHECK(std::string(e.what()).find("tokenizer.chat_template") != std::string::npos);
}
