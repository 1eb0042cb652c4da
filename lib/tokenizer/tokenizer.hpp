#pragma once
// Tokenizers built from GGUF metadata: SPM (tokenizer.ggml.model = "llama") and byte-level BPE
// ("gpt2", Falcon's and OPT's vocabularies).
#include <cstdint>
#include <memory>
#include <optional>
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

enum class vocab_model : uint8_t { spm, bpe };

// The BPE pre-tokenizer's rules (docs/tokenizer.md): Falcon's (Hugging Face's Falcon tokenizer,
// tokenizer.ggml.pre = "falcon") or GPT-2's own regular expression ("gpt-2", OPT).
enum class bpe_pre : uint8_t { falcon, gpt2 };

struct vocab {
    vocab_model model = vocab_model::spm;
    std::vector<std::string> text;   // token text as stored (U+2581 for spaces in SPM)
    std::vector<float> score;
    std::vector<token_type> type;
    int32_t bos = 1, eos = 2, unk = 0, sep = -1, pad = -1;
    int32_t newline = -1; // id of "<0x0A>" (SPM) or of "\xC4\x8A" (BPE: U+010A, byte 0x0A)
    // End of turn: tokenizer.ggml.eot_token_id; when -1, from_vocab looks for the token by its
    // text (docs/tokenizer.md, "End of generation") and leaves -1 when there is none.
    int32_t eot = -1;
    std::string chat_template; // tokenizer.chat_template (a Jinja text); "" when absent

    // BPE only. tokenizer.ggml.merges: "left right" in the GPT-2 byte alphabet, rank = index.
    std::vector<std::string> merges;
    bpe_pre pre = bpe_pre::falcon;
    // tokenizer.ggml.add_bos_token. Read for BPE only (absent: no BOS); SPM always uses its BOS.
    std::optional<bool> add_bos_token;
};

class tokenizer {
public:
    // Reads tokenizer.ggml.* from the file; throws pi::error(status::format) naming the key
    // at fault (or the unknown tokenizer.ggml.model value), status::unsupported for a
    // tokenizer.ggml.pre whose rules are not implemented.
    static std::unique_ptr<tokenizer> from_gguf(const gguf::file& f);
    static std::unique_ptr<tokenizer> from_vocab(vocab v); // throws like from_gguf
    ~tokenizer();

    const vocab& vocabulary() const noexcept;
    int32_t n_tokens() const noexcept;

    // Encoding (docs/tokenizer.md). add_bos asks for the BOS the vocabulary uses: SPM always has
    // one, BPE only when the file's tokenizer.ggml.add_bos_token is true (uses_bos()). SPM adds a
    // leading space to non-empty text, BPE does not; "" gives [] (or [BOS]). With parse_special,
    // the texts of control, user-defined and unknown tokens in `text` become those tokens
    // (longest first) and each text between them is encoded on its own (SPM: with its own
    // leading space), as llama.cpp's parse_special does. SPM never throws on any UTF-8 or invalid
    // bytes; BPE throws pi::error(invalid_argument) naming a byte the vocabulary cannot spell
    // (none for a vocabulary with all 256 byte characters, as GPT-2's and Falcon's have).
    std::vector<int32_t> encode(std::string_view text, bool add_bos,
                                bool parse_special = false) const;
    bool uses_bos() const noexcept;

    // Whether a generated token ends the generation: EOS, EOT and the end-of-turn tokens found
    // by their text (docs/tokenizer.md). False for any other id, in range or not.
    bool is_eog(int32_t id) const noexcept;
    std::span<const int32_t> eog_tokens() const noexcept; // ascending ids

    // Text of one token as it appears in output: SPM U+2581 -> ' ', BPE each character of the
    // byte alphabet -> its byte (so a piece may be part of a UTF-8 character), byte tokens -> their
    // raw byte, control tokens -> "", unknown -> U+2585 (SPM) or "" (BPE). Throws
    // pi::error(invalid_argument) on a bad id.
    std::string piece(int32_t id) const;

    // Concatenation of pieces; SPM drops the one leading space of the first piece after an
    // optional BOS (the inverse of encode's leading space). Throws on a bad id.
    std::string decode(const int32_t* ids, size_t n) const;

private:
    tokenizer();
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace pi
