#pragma once
// The grammar as a sampler stage: forbids the tokens whose text cannot continue it
// (docs/grammar.md).
#include <memory>
#include <string_view>

#include "sampling/token_candidates.hpp"

namespace pi {

class tokenizer;

// Parses `gbnf` (start rule `root`, "root" when empty) and decodes every token's piece once.
// The constraint keeps no reference to `vocab`. Throws pi::error(invalid_argument) for a
// malformed grammar (parse_gbnf's messages).
std::unique_ptr<token_constraint>
make_grammar_constraint(std::string_view gbnf, std::string_view root, const tokenizer& vocab);

} // namespace pi
