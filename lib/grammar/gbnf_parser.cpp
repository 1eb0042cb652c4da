// GBNF text -> pi::grammar (docs/grammar.md). Groups and repetitions become generated rules;
// the checks that need every rule (undefined references, left recursion) run at the end.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "grammar/grammar.hpp"
#include "grammar/grammar_analysis.hpp"
#include "grammar/utf8_decoder.hpp"
#include "support/error.hpp"

namespace pi {
namespace {

// Bounds of {m,n}: a larger count is almost certainly a typo and would build that many rules.
constexpr uint32_t max_repetition = 10000;
// Limits that keep a hostile grammar from exhausting the host (docs/grammar.md, "Limits"): the
// parser recurses once per nested group, and nested repetitions multiply ("a"{10000}){10000}.
constexpr uint32_t max_nesting = 256;
constexpr uint64_t max_repeated_elements = uint64_t{1} << 20;

struct item {
    bool is_rule = false;
    uint32_t index = 0; // class index, or symbol index while parsing
};
using sequence = std::vector<item>;

struct symbol {
    std::string name;
    std::vector<sequence> alternatives;
    bool defined = false;
    size_t defined_at = 0; // offset of the definition (of the group, for a generated rule)
    size_t referenced_at = std::numeric_limits<size_t>::max();
    std::string owner;       // the written rule it belongs to
    bool repetition = false; // generated for * + {m,}: it refers to itself
};

bool is_name_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Sorts and merges the ranges so that matching may stop at the first range past the code point.
void normalize(grammar_char_class& c) {
    auto& r = c.ranges;
    std::sort(r.begin(), r.end(), [](const code_point_range& a, const code_point_range& b) {
        return a.first < b.first;
    });
    std::vector<code_point_range> merged;
    for (const code_point_range& x : r) {
        if (!merged.empty() && x.first <= merged.back().last + 1)
            merged.back().last = std::max(merged.back().last, x.last);
        else
            merged.push_back(x);
    }
    r = std::move(merged);
}

class gbnf_parser {
  public:
    explicit gbnf_parser(std::string_view text) : text_(text) {}

    grammar parse(std::string_view root) {
        skip_space(true);
        if (at_end()) fail_at(0, "the grammar is empty (no rules)");
        while (!at_end())
            parse_rule();
        for (const symbol& s : symbols_)
            if (!s.defined) fail_at(s.referenced_at, "undefined rule '", s.name, "'");
        const auto r = names_.find(std::string(root));
        if (r == names_.end()) fail_at(0, "missing root rule '", root, "'");
        return flatten(r->second);
    }

  private:
    std::string_view text_;
    size_t pos_ = 0;
    std::vector<symbol> symbols_;
    std::unordered_map<std::string, uint32_t> names_; // written rules only
    std::vector<grammar_char_class> classes_;
    std::string current_rule_;
    uint32_t depth_ = 0;             // groups open around the current position
    uint64_t repeated_elements_ = 0; // elements the repetitions have made so far

    bool at_end() const noexcept { return pos_ >= text_.size(); }
    char peek(size_t ahead = 0) const noexcept {
        return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
    }
    bool at_newline() const noexcept { return peek() == '\n' || peek() == '\r'; }

    template <typename... Parts> [[noreturn]] void fail_at(size_t offset, Parts&&... parts) const {
        fail_with(status::invalid_argument, offset, std::forward<Parts>(parts)...);
    }

    // A grammar past a limit is well-formed, only too large: status::unsupported.
    template <typename... Parts>
    [[noreturn]] void fail_with(status code, size_t offset, Parts&&... parts) const {
        size_t line = 1, column = 1;
        for (size_t i = 0; i < offset && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                column = 1;
            } else if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) {
                ++column; // columns count code points, not bytes
            }
        }
        fail(code, "grammar: line ", line, ", column ", column, ": ",
             std::forward<Parts>(parts)...);
    }

    // Spaces, tabs and # comments; newlines too where a rule may continue over lines.
    void skip_space(bool newlines) {
        while (!at_end()) {
            const char c = peek();
            if (c == ' ' || c == '\t') {
                ++pos_;
            } else if (c == '#') {
                while (!at_end() && !at_newline())
                    ++pos_;
            } else if (newlines && (c == '\n' || c == '\r')) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    std::string parse_name() {
        const size_t start = pos_;
        while (!at_end() && is_name_char(peek()))
            ++pos_;
        return std::string(text_.substr(start, pos_ - start));
    }

    uint32_t symbol_named(const std::string& name, size_t at) {
        auto [it, added] = names_.try_emplace(name, static_cast<uint32_t>(symbols_.size()));
        if (added) {
            symbol s;
            s.name = name;
            s.owner = name;
            symbols_.push_back(std::move(s));
        }
        symbol& s = symbols_[it->second];
        s.referenced_at = std::min(s.referenced_at, at);
        return it->second;
    }

    uint32_t generated_symbol(size_t at, bool repetition) {
        symbol s;
        s.name = current_rule_ + "/" + std::to_string(symbols_.size());
        s.owner = current_rule_;
        s.defined = true;
        s.defined_at = at;
        s.repetition = repetition;
        symbols_.push_back(std::move(s));
        return static_cast<uint32_t>(symbols_.size() - 1);
    }

    void parse_rule() {
        const size_t start = pos_;
        const std::string name = parse_name();
        if (name.empty()) {
            if (peek() == '|')
                fail_at(pos_, "'|' must continue a rule (put it after '::=' or an alternative)");
            fail_at(pos_, "expected a rule name, found ", describe_here());
        }
        skip_space(false);
        if (text_.substr(pos_, 3) != "::=")
            fail_at(pos_, "expected '::=' after rule name '", name, "', found ", describe_here());
        pos_ += 3;
        const uint32_t id = symbol_named(name, start);
        symbol& s = symbols_[id];
        if (s.defined) fail_at(start, "rule '", name, "' is defined twice");
        s.defined = true;
        s.defined_at = start;
        current_rule_ = name;
        skip_space(true);
        std::vector<sequence> alternatives = parse_alternatives(false);
        symbols_[id].alternatives = std::move(alternatives);
        if (!at_end() && !at_newline())
            fail_at(pos_, "expected the end of rule '", name, "', found ", describe_here());
        skip_space(true);
    }

    std::string describe_here() const {
        if (at_end()) return "the end of the grammar";
        if (at_newline()) return "the end of the line";
        const auto b = static_cast<uint8_t>(peek());
        if (b < 0x20 || b >= 0x7F) return "a non-ASCII or control byte";
        return concat("'", peek(), "'");
    }

    std::vector<sequence> parse_alternatives(bool nested) {
        std::vector<sequence> alternatives;
        alternatives.push_back(parse_sequence(nested));
        while (true) {
            if (peek() == '|') {
                ++pos_;
                skip_space(true);
                alternatives.push_back(parse_sequence(nested));
                continue;
            }
            // A line that starts with '|' continues the rule above it.
            if (!nested && at_newline()) {
                const size_t saved = pos_;
                skip_space(true);
                if (peek() == '|') continue;
                pos_ = saved;
            }
            return alternatives;
        }
    }

    sequence parse_sequence(bool nested) {
        sequence seq;
        std::optional<size_t> last_start; // where the item a repetition applies to begins
        while (!at_end()) {
            const char c = peek();
            const size_t item_at = pos_;
            if (c == '"') {
                last_start = seq.size();
                parse_literal(seq);
            } else if (c == '[') {
                last_start = seq.size();
                seq.push_back({false, parse_class()});
            } else if (c == '.') {
                ++pos_;
                last_start = seq.size();
                grammar_char_class any;
                any.negated = true;
                seq.push_back({false, add_class(std::move(any))});
            } else if (is_name_char(c)) {
                const std::string name = parse_name();
                last_start = seq.size();
                seq.push_back({true, symbol_named(name, item_at)});
            } else if (c == '(') {
                if (++depth_ > max_nesting)
                    fail_with(status::unsupported, item_at, "groups nested deeper than ",
                              max_nesting);
                ++pos_;
                skip_space(true);
                std::vector<sequence> inner = parse_alternatives(true);
                --depth_;
                if (peek() != ')') {
                    if (at_end()) fail_at(item_at, "unclosed '('");
                    fail_at(pos_, "expected ')', found ", describe_here());
                }
                ++pos_;
                last_start = seq.size();
                if (inner.size() == 1) {
                    seq.insert(seq.end(), inner[0].begin(), inner[0].end());
                } else {
                    const uint32_t id = generated_symbol(item_at, false);
                    symbols_[id].alternatives = std::move(inner);
                    seq.push_back({true, id});
                }
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (!last_start) fail_at(item_at, "'", c, "' has nothing before it to repeat");
                apply_repetition(seq, *last_start, item_at);
            } else if (c == '|' || c == ')' || c == '\n' || c == '\r') {
                break;
            } else if (c == ':' && text_.substr(pos_, 3) == "::=") {
                fail_at(item_at, "'::=' inside a rule (a new rule must start on its own line)");
            } else {
                fail_at(item_at, "unexpected ", describe_here());
            }
            skip_space(nested);
        }
        return seq;
    }

    uint32_t add_class(grammar_char_class c) {
        normalize(c);
        classes_.push_back(std::move(c));
        return static_cast<uint32_t>(classes_.size() - 1);
    }

    uint32_t single_char_class(char32_t c) {
        grammar_char_class k;
        k.ranges.push_back({c, c});
        return add_class(std::move(k));
    }

    // One character of a literal or class, escapes decoded; pos_ is on it.
    char32_t parse_char() {
        const size_t start = pos_;
        if (peek() == '\\') {
            if (pos_ + 1 >= text_.size()) fail_at(start, "'\\' at the end of the grammar");
            const char e = peek(1);
            pos_ += 2;
            switch (e) {
            case 'n':
                return U'\n';
            case 't':
                return U'\t';
            case 'r':
                return U'\r';
            case '\\':
                return U'\\';
            case '"':
                return U'"';
            case '[':
                return U'[';
            case ']':
                return U']';
            case 'x':
                return parse_hex(start, 2);
            case 'u':
                return parse_hex(start, 4);
            case 'U':
                return parse_hex(start, 8);
            default:
                fail_at(start, "unknown escape '\\", e, "'");
            }
        }
        // One UTF-8 encoded code point.
        const size_t length = std::min<size_t>(4, text_.size() - pos_);
        for (size_t n = 1; n <= length; ++n) {
            const utf8_text d = decode_utf8(text_.substr(pos_, n));
            if (!d.valid) break;
            if (!d.code_points.empty()) {
                pos_ += n;
                return d.code_points[0];
            }
        }
        fail_at(start, "invalid UTF-8");
    }

    char32_t parse_hex(size_t escape_at, int digits) {
        char32_t value = 0;
        for (int i = 0; i < digits; ++i) {
            const int h = hex_value(peek());
            if (h < 0)
                fail_at(escape_at, "escape '\\", text_[escape_at + 1], "' needs ", digits,
                        " hex digits");
            value = value * 16 + static_cast<char32_t>(h);
            ++pos_;
        }
        if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))
            fail_at(escape_at, "escape gives U+", std::hex, static_cast<uint32_t>(value),
                    ", which is not a Unicode scalar value");
        return value;
    }

    void parse_literal(sequence& seq) {
        const size_t start = pos_;
        ++pos_;
        while (true) {
            if (at_end() || at_newline()) fail_at(start, "unterminated literal");
            if (peek() == '"') {
                ++pos_;
                return;
            }
            seq.push_back({false, single_char_class(parse_char())});
        }
    }

    uint32_t parse_class() {
        const size_t start = pos_;
        ++pos_;
        grammar_char_class k;
        if (peek() == '^') {
            k.negated = true;
            ++pos_;
        }
        while (true) {
            if (at_end() || at_newline()) fail_at(start, "unterminated character class");
            if (peek() == ']') break;
            const size_t char_at = pos_;
            const char32_t first = parse_char();
            char32_t last = first;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
                ++pos_;
                if (at_newline()) fail_at(start, "unterminated character class");
                last = parse_char();
                if (last < first)
                    fail_at(char_at, "character range is reversed (end before start)");
            }
            k.ranges.push_back({first, last});
        }
        if (k.ranges.empty()) fail_at(start, "empty character class");
        ++pos_;
        return add_class(std::move(k));
    }

    uint32_t parse_count(size_t brace_at) {
        if (peek() < '0' || peek() > '9')
            fail_at(pos_, "expected a number in '{...}', found ", describe_here());
        uint64_t n = 0;
        while (peek() >= '0' && peek() <= '9') {
            n = n * 10 + static_cast<uint64_t>(peek() - '0');
            if (n > max_repetition) fail_at(brace_at, "repetition count over ", max_repetition);
            ++pos_;
        }
        return static_cast<uint32_t>(n);
    }

    void apply_repetition(sequence& seq, size_t body_start, size_t op_at) {
        const sequence body(seq.begin() + static_cast<ptrdiff_t>(body_start), seq.end());
        seq.resize(body_start);
        uint32_t min = 0, max = 0;
        bool unbounded = false;
        const char op = peek();
        ++pos_;
        if (op == '*') {
            unbounded = true;
        } else if (op == '+') {
            min = 1;
            unbounded = true;
        } else if (op == '?') {
            max = 1;
        } else {
            skip_space(true);
            const bool from_zero = peek() == ','; // {,n}
            min = max = from_zero ? 0 : parse_count(op_at);
            skip_space(true);
            if (peek() == ',') {
                ++pos_;
                skip_space(true);
                if (peek() == '}') {
                    if (from_zero) fail_at(op_at, "repetition {,} needs a count");
                    unbounded = true;
                } else {
                    max = parse_count(op_at);
                    if (max < min)
                        fail_at(op_at, "repetition {", min, ",", max,
                                "} has its maximum below its minimum");
                }
                skip_space(true);
            }
            if (peek() != '}') fail_at(pos_, "expected '}', found ", describe_here());
            ++pos_;
        }
        if (unbounded && body.empty())
            fail_at(op_at, "repeated item matches only empty text, so it could repeat forever");
        // The copies made below: min bodies inline, then one more per optional repetition (or
        // one for the recursive rule), each with a reference.
        repeated_elements_ += body.size() * min + (body.size() + 1) * (unbounded ? 1 : max - min);
        if (repeated_elements_ > max_repeated_elements)
            fail_with(status::unsupported, op_at, "repetitions make the grammar larger than ",
                      max_repeated_elements, " elements");
        for (uint32_t i = 0; i < min; ++i)
            seq.insert(seq.end(), body.begin(), body.end());
        if (unbounded) {
            // star ::= body star | (empty)
            const uint32_t star = generated_symbol(op_at, true);
            sequence again = body;
            again.push_back({true, star});
            symbols_[star].alternatives = {std::move(again), {}};
            seq.push_back({true, star});
            return;
        }
        // Up to max - min more: opt_k ::= body opt_(k-1) | (empty), nested, not recursive.
        std::optional<uint32_t> inner;
        for (uint32_t k = min; k < max; ++k) {
            const uint32_t opt = generated_symbol(op_at, false);
            sequence once = body;
            if (inner) once.push_back({true, *inner});
            symbols_[opt].alternatives = {std::move(once), {}};
            inner = opt;
        }
        if (inner) seq.push_back({true, *inner});
    }

    grammar flatten(uint32_t root) {
        grammar g;
        g.classes = std::move(classes_);
        g.root = root;
        g.rules.resize(symbols_.size());
        for (size_t i = 0; i < symbols_.size(); ++i) {
            g.rules[i].name = symbols_[i].name;
            for (const sequence& alt : symbols_[i].alternatives) {
                g.rules[i].alternatives.push_back(static_cast<uint32_t>(g.elements.size()));
                for (const item& it : alt)
                    g.elements.push_back(
                        {it.is_rule ? grammar_element::kind::rule : grammar_element::kind::chars,
                         it.index});
                g.elements.push_back({grammar_element::kind::end, 0});
            }
        }
        if (const auto cycle = find_left_recursion(g)) report_left_recursion(*cycle);
        return g;
    }

    [[noreturn]] void report_left_recursion(const std::vector<uint32_t>& cycle) const {
        for (const uint32_t r : cycle)
            if (symbols_[r].repetition)
                fail_at(symbols_[r].defined_at,
                        "repeated item can match empty text, so it could repeat forever");
        std::string path;
        std::string last;
        for (const uint32_t r : cycle) {
            if (symbols_[r].owner == last) continue;
            last = symbols_[r].owner;
            path += last + " -> ";
        }
        const symbol& first = symbols_[names_.at(symbols_[cycle.front()].owner)];
        fail_at(first.defined_at, "left recursion: rule '", first.name,
                "' can reach itself before matching any character (", path, first.name, ")");
    }
};

} // namespace

grammar parse_gbnf(std::string_view text, std::string_view root) {
    return gbnf_parser(text).parse(root);
}

} // namespace pi
