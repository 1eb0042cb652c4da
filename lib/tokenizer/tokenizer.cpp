// Vocabulary validation and the lookup tables; decoding (docs/tokenizer.md).
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/error.hpp"
#include "tokenizer/byte_alphabet.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace pi {
namespace {

constexpr std::string_view space_marker = "\xE2\x96\x81";  // U+2581
constexpr std::string_view unknown_piece = "\xE2\x96\x85"; // U+2585

void check_special_id(int32_t id, const char* key, size_t n_tokens) {
    if (id == -1) return;
    if (id < 0 || static_cast<size_t>(id) >= n_tokens)
        fail(status::format, key, " = ", id, " is outside the vocabulary of ", n_tokens,
             " tokens (expected 0..", n_tokens - 1, " or -1)");
}

int hex_digit(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// Byte tokens are spelled "<0xXX>"; the value is what they decode to.
int parse_byte_token(std::string_view text) noexcept {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    const int hi = hex_digit(text[3]);
    const int lo = hex_digit(text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void validate(vocab& v) {
    const size_t n = v.text.size();
    if (n == 0) fail(status::format, "tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail(status::format, "tokenizer.ggml.tokens has ", n, " entries, more than token ids hold");
    if (v.score.empty()) v.score.assign(n, 0.0f);
    if (v.score.size() != n)
        fail(status::format, "tokenizer.ggml.scores has ", v.score.size(),
             " entries but tokenizer.ggml.tokens has ", n);
    if (v.type.empty()) v.type.assign(n, token_type::normal);
    if (v.type.size() != n)
        fail(status::format, "tokenizer.ggml.token_type has ", v.type.size(),
             " entries but tokenizer.ggml.tokens has ", n);
    for (size_t i = 0; i < n; ++i) {
        // NaN would break the strict ordering the merge heap relies on.
        if (std::isnan(v.score[i])) fail(status::format, "tokenizer.ggml.scores[", i, "] is NaN");
        const auto t = static_cast<int32_t>(v.type[i]);
        if (t < static_cast<int32_t>(token_type::undefined) ||
            t > static_cast<int32_t>(token_type::byte))
            fail(status::format, "tokenizer.ggml.token_type[", i, "] = ", t,
                 " is not a token type (0..6)");
        if (v.type[i] == token_type::byte && parse_byte_token(v.text[i]) < 0)
            fail(status::format, "tokenizer.ggml.tokens[", i, "] is a byte token but its text '",
                 v.text[i], "' is not of the form <0xXX>");
    }
    check_special_id(v.bos, "tokenizer.ggml.bos_token_id", n);
    check_special_id(v.eos, "tokenizer.ggml.eos_token_id", n);
    check_special_id(v.unk, "tokenizer.ggml.unknown_token_id", n);
    check_special_id(v.sep, "tokenizer.ggml.seperator_token_id", n);
    check_special_id(v.pad, "tokenizer.ggml.padding_token_id", n);
    check_special_id(v.eot, "tokenizer.ggml.eot_token_id", n);
}

// Texts of the tokens that end a turn in the common chat formats: the EOT when the file names
// none (the first of them present), and, with EOS and EOT, the tokens that end a generation.
constexpr std::string_view end_of_turn_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>",
                                                  "<end_of_turn>", "<|endoftext|>"};
constexpr std::string_view end_of_message_text = "<|eom_id|>"; // Llama 3.1: a tool call ends

bool is_special_type(token_type t) noexcept {
    return t == token_type::control || t == token_type::user_defined || t == token_type::unknown;
}

void build_special_tables(vocab_tables& t) {
    const size_t n = t.v.text.size();
    for (size_t i = 0; i < n; ++i)
        if (is_special_type(t.v.type[i]) && !t.v.text[i].empty())
            t.special_by_length.push_back(static_cast<int32_t>(i));
    std::stable_sort(t.special_by_length.begin(), t.special_by_length.end(),
                     [&](int32_t a, int32_t b) { return t.v.text[a].size() > t.v.text[b].size(); });

    if (t.v.eot == -1) {
        for (const std::string_view text : end_of_turn_texts) {
            if (const int32_t id = t.find(text); id >= 0) {
                t.v.eot = id;
                break;
            }
        }
    }
    for (const int32_t id : {t.v.eos, t.v.eot, t.find(end_of_message_text)})
        if (id >= 0) t.eog.push_back(id);
    for (const std::string_view text : end_of_turn_texts)
        if (const int32_t id = t.find(text); id >= 0) t.eog.push_back(id);
    std::sort(t.eog.begin(), t.eog.end());
    t.eog.erase(std::unique(t.eog.begin(), t.eog.end()), t.eog.end());
}

} // namespace

tokenizer::tokenizer() = default;
tokenizer::~tokenizer() = default;

std::unique_ptr<tokenizer> tokenizer::from_vocab(vocab v) {
    validate(v);
    auto impl_ptr = std::make_unique<impl>();
    impl& t = *impl_ptr;
    t.v = std::move(v);
    const size_t n = t.v.text.size();
    t.id_of.reserve(n);
    t.byte_value.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
        // Later duplicates win, as in llama.cpp's token_to_id.
        t.id_of.insert_or_assign(t.v.text[i], static_cast<int32_t>(i));
        t.max_token_bytes = std::max(t.max_token_bytes, t.v.text[i].size());
        if (t.v.type[i] == token_type::byte)
            t.byte_value[i] = static_cast<uint8_t>(parse_byte_token(t.v.text[i]));
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        const int32_t id = t.find(name);
        t.byte_token[b] = id >= 0 ? id : t.v.unk;
    }
    if (t.v.model == vocab_model::bpe) {
        build_bpe_tables(t);
        t.v.newline = t.find(byte_alphabet::text('\n'));
    } else {
        t.v.newline = t.find("<0x0A>");
    }
    build_special_tables(t);

    std::unique_ptr<tokenizer> result(new tokenizer());
    result->impl_ = std::move(impl_ptr);
    return result;
}

const vocab& tokenizer::vocabulary() const noexcept {
    return impl_->v;
}

int32_t tokenizer::n_tokens() const noexcept {
    return static_cast<int32_t>(impl_->v.text.size());
}

bool tokenizer::uses_bos() const noexcept {
    return impl_->v.model == vocab_model::spm || impl_->v.add_bos_token.value_or(false);
}

std::vector<int32_t> tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
    std::vector<int32_t> out;
    if (add_bos && uses_bos() && impl_->v.bos != -1) out.push_back(impl_->v.bos);
    if (text.empty()) return out;
    const auto encode_plain = [&](std::string_view plain) {
        if (impl_->v.model == vocab_model::bpe)
            bpe_encode(*impl_, plain, out);
        else
            spm_encode(*impl_, plain, out);
    };
    if (!parse_special) {
        encode_plain(text);
        return out;
    }
    // Every plain fragment begins the text or follows a special token, and llama.cpp gives each
    // such fragment the SPM leading space (BPE adds none).
    for (const text_fragment& f : split_at_special_tokens(*impl_, text)) {
        if (f.token >= 0)
            out.push_back(f.token);
        else
            encode_plain(f.text);
    }
    return out;
}

bool tokenizer::is_eog(int32_t id) const noexcept {
    return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}

std::span<const int32_t> tokenizer::eog_tokens() const noexcept {
    return impl_->eog;
}

std::string tokenizer::piece(int32_t id) const {
    if (id < 0 || id >= n_tokens())
        fail(status::invalid_argument, "token id ", id, " is outside the vocabulary of ",
             n_tokens(), " tokens");
    const std::string& text = impl_->v.text[id];
    const bool bpe = impl_->v.model == vocab_model::bpe;
    switch (impl_->v.type[id]) {
    case token_type::normal: {
        if (bpe) return byte_alphabet::to_bytes(text);
        std::string out;
        out.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
            if (text.compare(i, space_marker.size(), space_marker) == 0) {
                out += ' ';
                i += space_marker.size();
            } else {
                out += text[i++];
            }
        }
        return out;
    }
    case token_type::unknown:
        // llama.cpp's BPE pieces leave unknown tokens out, as control tokens.
        return bpe ? std::string() : std::string(unknown_piece);
    case token_type::byte:
        return std::string(1, static_cast<char>(impl_->byte_value[id]));
    case token_type::user_defined:
        return text;
    case token_type::undefined:
    case token_type::control:
    case token_type::unused:
        break;
    }
    return {};
}

std::string tokenizer::decode(const int32_t* ids, size_t n) const {
    std::string out;
    if (impl_->v.model == vocab_model::bpe) {
        for (size_t i = 0; i < n; ++i)
            out += piece(ids[i]);
        return out;
    }
    // llama_detokenize_spm: the first piece after an optional BOS loses one leading space.
    const size_t first = n > 0 && ids[0] == impl_->v.bos ? 1 : 0;
    for (size_t i = 0; i < n; ++i) {
        std::string p = piece(ids[i]);
        if (i == first && !p.empty() && p.front() == ' ')
            out.append(p, 1);
        else
            out += p;
    }
    return out;
}

} // namespace pi
