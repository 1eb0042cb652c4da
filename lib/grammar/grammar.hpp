#pragma once
// A parsed GBNF grammar (docs/grammar.md): rules whose alternatives are sequences of character
// classes and rule references, flattened into one element array for the matcher.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pi {

// Code points first..last, inclusive.
struct code_point_range {
    char32_t first = 0;
    char32_t last = 0;
};

// A set of code points: the union of sorted, disjoint ranges, or its complement when negated
// ('.' is the complement of nothing).
struct grammar_char_class {
    std::vector<code_point_range> ranges;
    bool negated = false;

    bool matches(char32_t c) const noexcept {
        // Inline: the token filter calls this once per candidate and live stack.
        for (const code_point_range& r : ranges) {
            if (c < r.first) break;
            if (c <= r.last) return !negated;
        }
        return negated;
    }
    // Whether some code point of first..last is in the class.
    bool intersects(char32_t first, char32_t last) const noexcept;
};

struct grammar_element {
    enum class kind : uint8_t { chars, rule, end };
    kind type = kind::end;
    uint32_t index = 0; // into grammar::classes (chars) or grammar::rules (rule)
};

struct grammar_rule {
    std::string name;                   // as written; generated rules get "owner/n"
    std::vector<uint32_t> alternatives; // offsets into grammar::elements, each ending with `end`
};

struct grammar {
    std::vector<grammar_element> elements;
    std::vector<grammar_char_class> classes;
    std::vector<grammar_rule> rules;
    uint32_t root = 0;
};

// Parses GBNF text; `root` names the start rule. Throws pi::error(status::invalid_argument,
// "grammar: line L, column C: ...") for malformed text, an undefined rule, a missing root and
// left recursion.
grammar parse_gbnf(std::string_view text, std::string_view root = "root");

} // namespace pi
