#pragma once
// The BPE pre-tokenizer: a text cut into the words that byte-level BPE merges within
// (docs/tokenizer.md, "BPE").
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace pi {

// Appends the words of `text`, in order, as views into it; together they are the whole text.
// Invalid UTF-8 bytes are kept, each a character of class "other".
void pre_tokenize(bpe_pre rules, std::string_view text, std::vector<std::string_view>& words);

} // namespace pi
