#pragma once
// Tokenizers built from GGUF metadata: SPM (tokenizer.ggml.model = "llama") today.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pi::gguf {
class file;
}

namespace pi {

enum class token_type : int32_t {
    undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

struct vocab {
    std::vector<std::string> text;   // token text as stored (U+2581 for spaces in SPM)
    std::vector<float> score;
    std::vector<token_type> type;
    int32_t bos = 1, eos = 2, unk = 0, sep = -1, pad = -1;
    int32_t newline = -1; // id of "<0x0A>" (SPM)
    // End of turn: tokenizer.ggml.eot_token_id; when -1, from_vocab looks for the token by its
    // text (docs/tokenizer.md, "End of generation") and leaves -1 when there is none.
    int32_t eot = -1;
    std::string chat_template; // tokenizer.chat_template (a Jinja text); "" when absent
};

class tokenizer {
public:
    // Reads tokenizer.ggml.* from the file; throws pi::error(status::format) naming the key
    // at fault (or the unknown tokenizer.ggml.model value), status::unsupported for "gpt2".
    static std::unique_ptr<tokenizer> from_gguf(const gguf::file& f);
    static std::unique_ptr<tokenizer> from_vocab(vocab v); // throws like from_gguf
    ~tokenizer();

    const vocab& vocabulary() const noexcept;
    int32_t n_tokens() const noexcept;

    // SPM encoding (docs/tokenizer.md): a leading space is added to non-empty text; "" gives []
    // (or [BOS] when add_bos). With parse_special, the texts of control, user-defined and unknown
    // tokens in `text` become those tokens (longest first) and each text between them is encoded
    // with its own leading space, as llama.cpp's parse_special does. Never throws on any UTF-8 or
    // invalid bytes.
    std::vector<int32_t> encode(std::string_view text, bool add_bos,
                                bool parse_special = false) const;

    // Whether a generated token ends the generation: EOS, EOT and the end-of-turn tokens found
    // by their text (docs/tokenizer.md). False for any other id, in range or not.
    bool is_eog(int32_t id) const noexcept;
    std::span<const int32_t> eog_tokens() const noexcept; // ascending ids

    // Text of one token as it appears in output: U+2581 -> ' ', byte tokens -> their raw byte,
    // control tokens -> "", unknown -> U+2585. Throws pi::error(invalid_argument) on a bad id.
    std::string piece(int32_t id) const;

    // Concatenation of pieces; drops the one leading space of the first piece after an optional
    // BOS (the inverse of encode's leading space). Throws on a bad id.
    std::string decode(const int32_t* ids, size_t n) const;

private:
    tokenizer();
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace pi
