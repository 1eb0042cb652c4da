#pragma once
// State shared by the files of lib/tokenizer: the validated vocabulary and its lookup tables.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace pi {

struct text_hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
        return std::hash<std::string_view>{}(s);
    }
};

// BPE merge ranks over symbols: a symbol is a token id (< n_vocab) or, for a text that merges
// name but the vocabulary lacks, an id from n_vocab up. Merging by ids instead of texts gives the
// same result (a text has one id) without building a string per candidate pair.
struct bpe_tables {
    struct merge {
        int32_t rank;   // index in tokenizer.ggml.merges (the first, for a repeated pair)
        int32_t result; // symbol of the joined text
    };
    std::unordered_map<uint64_t, merge> merges; // key: left symbol << 32 | right symbol
    // Symbol of each byte's one-character text (byte_alphabet), -1 when neither the vocabulary
    // nor any merge has it.
    std::array<int32_t, 256> byte_symbol{};
    int32_t n_vocab = 0;

    static uint64_t key(int32_t left, int32_t right) noexcept {
        return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 |
               static_cast<uint32_t>(right);
    }
};

// Separate from tokenizer::impl (a private name) so the encoder's file can take it.
struct vocab_tables {
    vocab v;
    // Lookups take views into the text being encoded, so the map accepts string_view keys.
    std::unordered_map<std::string, int32_t, text_hash, std::equal_to<>> id_of;
    size_t max_token_bytes = 0; // longer candidate merges cannot be tokens: skip the lookup
    std::array<int32_t, 256> byte_token{}; // id of "<0xXX>", or unk (-1 when neither exists)
    std::vector<uint8_t> byte_value;       // raw byte of each BYTE token (0 for others)
    // Control, user-defined and unknown tokens with a text: what parse_special looks for,
    // longest text first (ties by ascending id).
    std::vector<int32_t> special_by_length;
    std::vector<int32_t> eog; // ascending ids of the end-of-generation tokens
    bpe_tables bpe;           // filled for BPE vocabularies only

    int32_t find(std::string_view text) const noexcept {
        const auto it = id_of.find(text);
        return it == id_of.end() ? -1 : it->second;
    }
};

struct tokenizer::impl : vocab_tables {};

// SPM encoding (docs/tokenizer.md: with the leading space) appended to `out`.
void spm_encode(const vocab_tables& t, std::string_view text, std::vector<int32_t>& out);

// Checks tokenizer.ggml.merges (pi::error(format) naming the entry) and fills t.bpe.
void build_bpe_tables(vocab_tables& t);

// Byte-level BPE encoding (docs/tokenizer.md, "BPE") appended to `out`.
void bpe_encode(const vocab_tables& t, std::string_view text, std::vector<int32_t>& out);

// A piece of a text cut at special tokens: either that token, or text between them.
struct text_fragment {
    int32_t token = -1;    // the special token, or -1 for plain text
    std::string_view text; // the plain text (never empty), or the token's text in the input
};

// Cuts `text` at every occurrence of the texts of t.special_by_length, taking longer tokens
// first; the plain fragments in between are never empty.
std::vector<text_fragment> split_at_special_tokens(const vocab_tables& t, std::string_view text);

} // namespace pi
