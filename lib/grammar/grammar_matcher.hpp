#pragma once
// Matching text against a grammar one code point at a time (docs/grammar.md): the state is the
// set of parse stacks that are still alive, as in llama.cpp's grammar sampler.
#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/grammar.hpp"
#include "grammar/utf8_decoder.hpp"

namespace pi {

// Positions in grammar::elements still to match, innermost last. After expansion the top is a
// character class; an empty stack has matched the whole root rule.
using grammar_stack = std::vector<uint32_t>;
using grammar_stacks = std::vector<grammar_stack>;

// The stacks before any text: the root's alternatives, expanded.
grammar_stacks initial_stacks(const grammar& g);

// Adds to `out` the stacks that follow once the top of `stack` (a character class) has matched.
void stacks_after_top(const grammar& g, const grammar_stack& stack, grammar_stacks& out);

// The stacks after code point c; empty when no stack accepts it.
grammar_stacks stacks_after(const grammar& g, const grammar_stacks& stacks, char32_t c);

// Whether one of the stacks has matched the root completely.
bool stacks_may_end(const grammar_stacks& stacks) noexcept;

// Whether some completion of the unfinished code point `p` is accepted by one of the stacks.
bool stacks_accept_partial(const grammar& g, const grammar_stacks& stacks, const utf8_partial& p);

// A grammar's state over a growing UTF-8 text.
class grammar_matcher {
  public:
    explicit grammar_matcher(const grammar& g);

    // Appends bytes; false (and the state unchanged) when the text can no longer match.
    bool feed(std::string_view bytes);
    // Whether the text so far is a complete match of the root.
    bool may_end() const noexcept;
    void reset();

    const grammar_stacks& stacks() const noexcept { return stacks_; }
    const utf8_partial& partial() const noexcept { return partial_; }

  private:
    const grammar* grammar_;
    grammar_stacks stacks_;
    utf8_partial partial_;
};

} // namespace pi
