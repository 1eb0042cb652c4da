// The special-token, end-of-generation and chat-template functions of the C API, on a model whose
// vocabulary has ChatML tokens and a ChatML template, and on the fixture's, which has neither.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "api_test_data.hpp"
#include "powerinfer.h"

namespace {

// A GGUF v3 metadata-only file, written byte by byte: the tests link only the public library.
class gguf_metadata {
  public:
    void string(const std::string& key, const std::string& value) {
        kv_header(key, 8);
        text(value);
    }
    void u32(const std::string& key, uint32_t value) {
        kv_header(key, 4);
        raw(value);
    }
    void strings(const std::string& key, const std::vector<std::string>& values) {
        kv_header(key, 9);
        raw(uint32_t{8});
        raw(uint64_t{values.size()});
        for (const std::string& v : values)
            text(v);
    }
    void i32s(const std::string& key, const std::vector<int32_t>& values) {
        kv_header(key, 9);
        raw(uint32_t{5});
        raw(uint64_t{values.size()});
        for (const int32_t v : values)
            raw(v);
    }
    void write(const std::string& path) const {
        std::string file = "GGUF";
        append(file, uint32_t{3});
        append(file, uint64_t{0}); // tensors
        append(file, n_kv_);
        file += body_;
        file.resize((file.size() + 31) / 32 * 32, '\0');
        std::ofstream(path, std::ios::binary) << file;
    }

  private:
    template <typename T> static void append(std::string& out, T v) {
        out.append(reinterpret_cast<const char*>(&v), sizeof v); // GGUF is little-endian, as x86
    }
    template <typename T> void raw(T v) { append(body_, v); }
    void text(const std::string& s) {
        raw(uint64_t{s.size()});
        body_ += s;
    }
    void kv_header(const std::string& key, uint32_t type) {
        ++n_kv_;
        text(key);
        raw(type);
    }
    std::string body_;
    uint64_t n_kv_ = 0;
};

constexpr pi_token im_start = 259, im_end = 260;

const char* const chatml_jinja =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// <unk>, <s>, </s>, the 256 byte tokens, then the ChatML tokens and "▁" for the leading space;
// with or without the ChatML template.
std::string write_chatml_model(const std::string& name, bool with_template) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char byte_name[8];
        std::snprintf(byte_name, sizeof byte_name, "<0x%02X>", b);
        tokens.push_back(byte_name);
        types.push_back(6);
    }
    tokens.insert(tokens.end(), {"<|im_start|>", "<|im_end|>", "\xE2\x96\x81"});
    types.insert(types.end(), {3, 3, 1});
    gguf_metadata m;
    m.string("tokenizer.ggml.model", "llama");
    m.strings("tokenizer.ggml.tokens", tokens);
    m.i32s("tokenizer.ggml.token_type", types);
    m.u32("tokenizer.ggml.bos_token_id", 1);
    m.u32("tokenizer.ggml.eos_token_id", 2);
    if (with_template) m.string("tokenizer.chat_template", chatml_jinja);
    const std::string base = std::string(PI_TEST_BINARY_DIR) + "/" + name;
    const std::string vocab = base + ".vocab.gguf";
    m.write(vocab);
    pi_synth_params p = pi_synth_default_params();
    p.n_embd = 64;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 176;
    p.seed = 5;
    p.vocab_path = vocab.c_str();
    const std::string out = base + ".gguf";
    REQUIRE(pi_synth_model_write(&p, out.c_str()) == PI_OK);
    return out;
}

std::string chatml_model() {
    static const std::string path = write_chatml_model("chat_api_chatml", true);
    return path;
}

std::string untemplated_model() {
    static const std::string path = write_chatml_model("chat_api_untemplated", false);
    return path;
}

// The fixture's vocabulary: no ChatML tokens, and a Question/Answer template of its own.
std::string fixture_model() {
    static const std::string path = [] {
        const std::string out = std::string(PI_TEST_BINARY_DIR) + "/chat_api_fixture.gguf";
        write_tiny_model(out, 7);
        return out;
    }();
    return path;
}

struct model_handle {
    pi_model* model = nullptr;
    explicit model_handle(const std::string& path) {
        REQUIRE(pi_model_load(path.c_str(), nullptr, &model) == PI_OK);
    }
    ~model_handle() { pi_model_free(model); }
    model_handle(const model_handle&) = delete;
    model_handle& operator=(const model_handle&) = delete;
};

std::vector<pi_token> tokenize(const pi_model* model, const std::string& text, uint32_t flags) {
    size_t n = 0;
    pi_tokenize_with_flags(model, text.data(), text.size(), flags, nullptr, 0, &n);
    std::vector<pi_token> ids(n);
    REQUIRE(pi_tokenize_with_flags(model, text.data(), text.size(), flags, ids.data(), ids.size(),
                                   &n) == PI_OK);
    return ids;
}

bool last_error_mentions(const char* needle) {
    return std::string(pi_last_error()).find(needle) != std::string::npos;
}

const pi_chat_message conversation[] = {
    {"system", "Be brief."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "Who are you?"},
};

const char* const conversation_chatml = "<|im_start|>system\nBe brief.<|im_end|>\n"
                                        "<|im_start|>user\nHi<|im_end|>\n"
                                        "<|im_start|>assistant\nHello!<|im_end|>\n"
                                        "<|im_start|>user\nWho are you?<|im_end|>\n"
                                        "<|im_start|>assistant\n";

} // namespace

TEST_CASE("tokenizing with PI_TOKENIZE_PARSE_SPECIAL turns ChatML markers into their tokens") {
    model_handle h(chatml_model());
    const std::string text = "<|im_start|>user<|im_end|>";
    const std::vector<pi_token> parsed = tokenize(h.model, text, PI_TOKENIZE_PARSE_SPECIAL);
    REQUIRE(parsed.size() > 2);
    CHECK(parsed.front() == im_start);
    CHECK(parsed.back() == im_end);
    // Without the flag the markers are spelled in byte tokens.
    for (const pi_token t : tokenize(h.model, text, 0)) {
        CHECK(t != im_start);
        CHECK(t != im_end);
    }
    const std::vector<pi_token> with_bos =
        tokenize(h.model, text, PI_TOKENIZE_ADD_BOS | PI_TOKENIZE_PARSE_SPECIAL);
    CHECK(with_bos.front() == 1);
    CHECK(std::vector<pi_token>(with_bos.begin() + 1, with_bos.end()) == parsed);

    size_t n = 0;
    std::vector<pi_token> plain(64);
    REQUIRE(pi_tokenize(h.model, text.data(), text.size(), 1, plain.data(), plain.size(), &n) ==
            PI_OK);
    plain.resize(n);
    CHECK(tokenize(h.model, text, PI_TOKENIZE_ADD_BOS) == plain);
}

TEST_CASE("pi_tokenize_with_flags rejects bad arguments and reports the needed size") {
    model_handle h(chatml_model());
    const char* text = "<|im_start|>";
    pi_token ids[4];
    size_t n = 99;
    CHECK(pi_tokenize_with_flags(h.model, text, 12, 4u, ids, 4, &n) == PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_mentions("flags"));
    CHECK(n == 0);
    CHECK(pi_tokenize_with_flags(nullptr, text, 12, 0, ids, 4, &n) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_tokenize_with_flags(h.model, text, 12, 0, ids, 4, nullptr) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_tokenize_with_flags(h.model, nullptr, 3, 0, ids, 4, &n) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_tokenize_with_flags(h.model, text, 12, 0, nullptr, 4, &n) == PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_tokenize_with_flags(h.model, nullptr, 0, PI_TOKENIZE_ADD_BOS, ids, 4, &n) == PI_OK);
    CHECK(n == 1);
    // "<|im_start|>" without the flag is "▁" and 12 bytes: more than 4 tokens.
    CHECK(pi_tokenize_with_flags(h.model, text, 12, 0, ids, 4, &n) == PI_ERR_INVALID_ARGUMENT);
    CHECK(n == 13);
}

TEST_CASE("the EOT and the end-of-generation tokens come from the vocabulary") {
    model_handle chat(chatml_model());
    CHECK(pi_token_eot(chat.model) == im_end);
    CHECK(pi_token_is_eog(chat.model, im_end) == 1);
    CHECK(pi_token_is_eog(chat.model, pi_token_eos(chat.model)) == 1);
    CHECK(pi_token_is_eog(chat.model, im_start) == 0);
    CHECK(pi_token_is_eog(chat.model, -1) == 0);
    CHECK(pi_token_is_eog(chat.model, pi_n_vocab(chat.model)) == 0);
    CHECK(pi_token_is_eog(nullptr, 2) == 0);
    CHECK(pi_token_eot(nullptr) == -1);

    model_handle fixture(fixture_model());
    CHECK(pi_token_eot(fixture.model) == -1);
    CHECK(pi_token_is_eog(fixture.model, 2) == 1);
    CHECK(pi_token_is_eog(fixture.model, 300) == 0);
}

TEST_CASE("the model's template renders the conversation and names its format") {
    model_handle h(chatml_model());
    char buf[512];
    size_t len = 0;
    REQUIRE(pi_chat_apply_template(h.model, nullptr, conversation, 4, 1, buf, sizeof buf, &len) ==
            PI_OK);
    CHECK(std::string(buf) == conversation_chatml);
    CHECK(len == std::strlen(conversation_chatml));
    REQUIRE(pi_chat_template_name(h.model, nullptr, buf, sizeof buf, &len) == PI_OK);
    CHECK(std::string(buf) == "chatml");
    CHECK(len == 6);

    // The rendered text tokenizes into the ChatML tokens with PI_TOKENIZE_PARSE_SPECIAL.
    REQUIRE(pi_chat_apply_template(h.model, nullptr, conversation, 4, 1, buf, sizeof buf, &len) ==
            PI_OK);
    const std::vector<pi_token> ids = tokenize(h.model, buf, PI_TOKENIZE_PARSE_SPECIAL);
    size_t starts = 0;
    for (const pi_token t : ids)
        starts += t == im_start ? 1 : 0;
    CHECK(starts == 5);
}

TEST_CASE("a named template or a recognised Jinja text overrides the model's") {
    model_handle h(chatml_model());
    char buf[512];
    size_t len = 0;
    const pi_chat_message one[] = {{"user", "Hi"}};
    REQUIRE(pi_chat_apply_template(h.model, "llama2", one, 1, 1, buf, sizeof buf, &len) == PI_OK);
    CHECK(std::string(buf) == "[INST] Hi [/INST]");
    REQUIRE(pi_chat_apply_template(nullptr, "llama3", one, 1, 0, buf, sizeof buf, &len) == PI_OK);
    CHECK(std::string(buf) == "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
    REQUIRE(pi_chat_apply_template(nullptr, chatml_jinja, one, 1, 0, buf, sizeof buf, &len) ==
            PI_OK);
    CHECK(std::string(buf) == "<|im_start|>user\nHi<|im_end|>\n");
    REQUIRE(pi_chat_template_name(nullptr, "mistral", buf, sizeof buf, &len) == PI_OK);
    CHECK(std::string(buf) == "llama2");
    REQUIRE(pi_chat_apply_template(nullptr, "zephyr", nullptr, 0, 1, buf, sizeof buf, &len) ==
            PI_OK);
    CHECK(std::string(buf) == "<|assistant|>\n");
}

TEST_CASE("unknown templates and a model without one are PI_ERR_UNSUPPORTED, saying why") {
    char buf[256];
    size_t len = 0;
    model_handle none(untemplated_model());
    CHECK(pi_chat_apply_template(none.model, nullptr, conversation, 4, 1, buf, sizeof buf, &len) ==
          PI_ERR_UNSUPPORTED);
    CHECK(last_error_mentions("the model has no chat template"));
    CHECK(pi_chat_template_name(none.model, nullptr, buf, sizeof buf, &len) == PI_ERR_UNSUPPORTED);
    REQUIRE(pi_chat_template_name(none.model, "vicuna", buf, sizeof buf, &len) == PI_OK);
    CHECK(std::string(buf) == "vicuna");

    model_handle fixture(fixture_model());
    CHECK(pi_chat_apply_template(fixture.model, nullptr, conversation, 4, 1, buf, sizeof buf,
                                 &len) == PI_ERR_UNSUPPORTED);
    CHECK(last_error_mentions("chat template not recognised: {% for message in messages %}"));
    CHECK(pi_chat_apply_template(fixture.model, "nope", conversation, 4, 1, buf, sizeof buf,
                                 &len) == PI_ERR_UNSUPPORTED);
    CHECK(last_error_mentions("unknown chat template name 'nope'"));
    CHECK(pi_chat_template_name(nullptr, "{{ messages }}", buf, sizeof buf, &len) ==
          PI_ERR_UNSUPPORTED);
    CHECK(last_error_mentions("chat template not recognised: {{ messages }}"));
}

TEST_CASE("pi_chat_apply_template and pi_chat_template_name reject bad arguments") {
    model_handle h(chatml_model());
    char buf[512];
    size_t len = 99;
    CHECK(pi_chat_apply_template(nullptr, nullptr, conversation, 4, 1, buf, sizeof buf, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_mentions("'model'"));
    CHECK(len == 0);
    CHECK(pi_chat_template_name(nullptr, nullptr, buf, sizeof buf, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_chat_apply_template(h.model, nullptr, nullptr, 2, 1, buf, sizeof buf, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_mentions("'messages'"));
    const pi_chat_message no_role[] = {{"user", "Hi"}, {nullptr, "x"}};
    CHECK(pi_chat_apply_template(h.model, nullptr, no_role, 2, 1, buf, sizeof buf, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_mentions("messages[1].role"));
    const pi_chat_message no_content[] = {{"user", nullptr}};
    CHECK(pi_chat_apply_template(h.model, nullptr, no_content, 1, 1, buf, sizeof buf, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(last_error_mentions("messages[0].content"));
    CHECK(pi_chat_apply_template(h.model, nullptr, conversation, 4, 1, buf, sizeof buf, nullptr) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_chat_apply_template(h.model, nullptr, conversation, 4, 1, nullptr, 8, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_chat_template_name(h.model, nullptr, buf, sizeof buf, nullptr) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(pi_chat_template_name(h.model, nullptr, nullptr, 8, &len) == PI_ERR_INVALID_ARGUMENT);
}

TEST_CASE("a short buffer reports the size needed without the NUL") {
    model_handle h(chatml_model());
    const size_t needed = std::strlen(conversation_chatml);
    std::vector<char> buf(needed + 1);
    size_t len = 0;
    CHECK(pi_chat_apply_template(h.model, nullptr, conversation, 4, 1, nullptr, 0, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(len == needed);
    CHECK(pi_chat_apply_template(h.model, nullptr, conversation, 4, 1, buf.data(), needed, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(len == needed);
    CHECK(pi_chat_apply_template(h.model, nullptr, conversation, 4, 1, buf.data(), needed + 1,
                                 &len) == PI_OK);
    CHECK(std::string(buf.data()) == conversation_chatml);

    char name[6];
    CHECK(pi_chat_template_name(h.model, nullptr, name, sizeof name, &len) ==
          PI_ERR_INVALID_ARGUMENT);
    CHECK(len == 6);
    char fits[7];
    CHECK(pi_chat_template_name(h.model, nullptr, fits, sizeof fits, &len) == PI_OK);
    CHECK(std::string(fits) == "chatml");
}
