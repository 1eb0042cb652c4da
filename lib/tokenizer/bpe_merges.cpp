// The merge table of a byte-level BPE vocabulary, built once at load.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>

#include "support/error.hpp"
#include "tokenizer/byte_alphabet.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace pi {

void build_bpe_tables(vocab_tables& t) {
    const std::vector<std::string>& merges = t.v.merges;
    if (merges.empty())
        fail(status::format, "tokenizer.ggml.merges is missing or empty: a gpt2 (BPE) vocabulary ",
             "needs its merges");
    const size_t n_vocab = t.v.text.size();
    // Each entry may add up to three texts to the symbols after the tokens.
    if (merges.size() > (static_cast<size_t>(std::numeric_limits<int32_t>::max()) - n_vocab) / 3)
        fail(status::format, "tokenizer.ggml.merges has ", merges.size(),
             " entries, more than symbol ids hold");

    bpe_tables& b = t.bpe;
    b.n_vocab = static_cast<int32_t>(n_vocab);
    // Texts that are not tokens, only sides or results of merges.
    std::unordered_map<std::string, int32_t, text_hash, std::equal_to<>> extra;
    const auto symbol_of = [&](std::string_view s) {
        if (const int32_t id = t.find(s); id >= 0) return id;
        const auto [it, added] =
            extra.try_emplace(std::string(s), static_cast<int32_t>(n_vocab + extra.size()));
        return it->second;
    };
    b.merges.reserve(merges.size());
    std::string joined;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string& entry = merges[i];
        // The separator is the first space after position 0, so a left side may be a space.
        const size_t space = entry.size() > 1 ? entry.find(' ', 1) : std::string::npos;
        if (space == std::string::npos || space + 1 == entry.size())
            fail(status::format, "tokenizer.ggml.merges[", i, "] = '", entry,
                 "' is not two texts separated by a space");
        const std::string_view left = std::string_view(entry).substr(0, space);
        const std::string_view right = std::string_view(entry).substr(space + 1);
        joined.assign(left);
        joined += right;
        const int32_t l = symbol_of(left);
        const int32_t r = symbol_of(right);
        const int32_t result = symbol_of(joined);
        // A repeated pair keeps its first (lowest) rank, as llama.cpp's bpe_ranks does.
        b.merges.try_emplace(bpe_tables::key(l, r),
                             bpe_tables::merge{static_cast<int32_t>(i), result});
    }
    for (int byte = 0; byte < 256; ++byte) {
        const std::string s = byte_alphabet::text(static_cast<uint8_t>(byte));
        const int32_t id = t.find(s);
        const auto it = extra.find(s);
        b.byte_symbol[byte] = id >= 0 ? id : it != extra.end() ? it->second : -1;
    }
}

} // namespace pi
