// GBNF parsing: the example grammars of the llama.cpp ecosystem parse, and every malformed case
// names the line and column at fault.
#include <doctest/doctest.h>

#include <string>

#include "grammar/grammar.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {

const char* const arithmetic = R"g(
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g";

const char* const json_grammar = R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)g";

const char* const list = R"g(
root ::= item+

# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
)g";

const char* const chess = R"g(
root   ::= (
    # it must start with the characters "1. " followed by a sequence
    # of characters that match the `move` rule, followed by a space, followed
    # by another move, and then a newline
    "1. " move " " move "\n"

    # it's followed by one or more subsequent moves, numbered with one or two digits
    ([1-9] [0-9]? ". " move " " move "\n")+
)
move   ::= (pawn | nonpawn | castle) [+#]?

# piece type, optional file/rank, optional capture, dest file & rank
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]

# optional file & capture, dest file & rank, optional promotion
pawn   ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBKQR])?

castle ::= "O-O" "-O"?
)g";

std::string error_of(const std::string& text, const std::string& root = "root") {
    return test::message_of([&] { (void)parse_gbnf(text, root); });
}

} // namespace

TEST_CASE("the example grammars parse") {
    for (const char* text : {arithmetic, json_grammar, list, chess}) {
        CAPTURE(text);
        const grammar g = parse_gbnf(text);
        CHECK(g.rules[g.root].name == "root");
        CHECK(!g.rules[g.root].alternatives.empty());
    }
}

TEST_CASE("a literal becomes one class per code point, escapes decoded") {
    const grammar g = parse_gbnf(R"(root ::= "a\n\x41\u00e9\"\\é")");
    const auto& alt = g.rules[g.root].alternatives;
    REQUIRE(alt.size() == 1);
    const char32_t expected[] = {U'a', U'\n', U'A', U'\u00e9', U'"', U'\\', U'\u00e9'};
    for (size_t i = 0; i < 7; ++i) {
        const grammar_element& e = g.elements[alt[0] + i];
        REQUIRE(e.type == grammar_element::kind::chars);
        const grammar_char_class& c = g.classes[e.index];
        CHECK(c.ranges.size() == 1);
        CHECK(c.ranges[0].first == expected[i]);
        CHECK(c.ranges[0].last == expected[i]);
    }
    CHECK(g.elements[alt[0] + 7].type == grammar_element::kind::end);
}

TEST_CASE("character classes merge ranges and keep negation") {
    const grammar g = parse_gbnf("root ::= [^a-cb-fz]");
    const grammar_char_class& c = g.classes[g.elements[g.rules[g.root].alternatives[0]].index];
    CHECK(c.negated);
    REQUIRE(c.ranges.size() == 2);
    CHECK(c.ranges[0].first == U'a');
    CHECK(c.ranges[0].last == U'f');
    CHECK(c.matches(U'g'));
    CHECK_FALSE(c.matches(U'z'));
    CHECK_FALSE(c.matches(U'c'));
}

TEST_CASE("a different start rule may be named") {
    const grammar g = parse_gbnf("a ::= \"x\"\nb ::= a a", "b");
    CHECK(g.rules[g.root].name == "b");
}

TEST_CASE("a line starting with '|' continues the rule above") {
    const grammar g = parse_gbnf("root ::= \"a\"\n  | \"b\"\n  | \"c\"\n");
    CHECK(g.rules[g.root].alternatives.size() == 3);
}

TEST_CASE("malformed grammars name the line and column") {
    struct bad {
        std::string text;
        std::string message;
    };
    const bad cases[] = {
        {"", "grammar: line 1, column 1: the grammar is empty (no rules)"},
        {"  # only a comment\n", "grammar: line 1, column 1: the grammar is empty (no rules)"},
        {"root ::= \"abc", "grammar: line 1, column 10: unterminated literal"},
        {"root ::= \"abc\ndef\"", "grammar: line 1, column 10: unterminated literal"},
        {"root ::= x\n", "grammar: line 1, column 10: undefined rule 'x'"},
        {"a ::= \"x\"\n", "grammar: line 1, column 1: missing root rule 'root'"},
        {"root ::= \"\\q\"", "grammar: line 1, column 11: unknown escape '\\q'"},
        {"root ::= \"\\x4\"", "grammar: line 1, column 11: escape '\\x' needs 2 hex digits"},
        {"root ::= \"\\uD800\"",
         "grammar: line 1, column 11: escape gives U+d800, which is not a Unicode scalar value"},
        {"root ::= [a-z", "grammar: line 1, column 10: unterminated character class"},
        {"root ::= []", "grammar: line 1, column 10: empty character class"},
        {"root ::= [z-a]",
         "grammar: line 1, column 11: character range is reversed (end before start)"},
        {"root ::= \"a\"\n\nfoo \"b\"",
         "grammar: line 3, column 5: expected '::=' after rule name 'foo', found '\"'"},
        {"root ::= (\"a\" | \"b\"", "grammar: line 1, column 10: unclosed '('"},
        {"root ::= \"a\")",
         "grammar: line 1, column 13: expected the end of rule 'root', found ')'"},
        {"root ::= * \"a\"", "grammar: line 1, column 10: '*' has nothing before it to repeat"},
        {"root ::= \"a\"{2,1}",
         "grammar: line 1, column 13: repetition {2,1} has its maximum below its minimum"},
        {"root ::= \"a\"{x}",
         "grammar: line 1, column 14: expected a number in '{...}', found 'x'"},
        {"root ::= \"a\"{3",
         "grammar: line 1, column 15: expected '}', found the end of the grammar"},
        {"root ::= \"a\"{,}", "grammar: line 1, column 13: repetition {,} needs a count"},
        {"root ::= \"a\"{99999}", "grammar: line 1, column 13: repetition count over 10000"},
        {"root ::= \"a\" @", "grammar: line 1, column 14: unexpected '@'"},
        {"root ::= \"a\"\nroot ::= \"b\"",
         "grammar: line 2, column 1: rule 'root' is defined twice"},
        {"root ::= \"é\" ~", "grammar: line 1, column 14: unexpected '~'"},
        {"root ::= \"\"*", "grammar: line 1, column 12: repeated item matches only empty text, so "
                           "it could repeat forever"},
        {"root ::= x*\nx ::= \"a\"?", "grammar: line 1, column 11: repeated item can match empty "
                                      "text, so it could repeat forever"},
        {"root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]+",
         "grammar: line 2, column 1: left recursion: rule 'expr' can reach itself before matching "
         "any character (expr -> expr)"},
        {"root ::= a\na ::= b? \"x\"\nb ::= \"y\" | a",
         "grammar: line 2, column 1: left recursion: rule 'a' can reach itself before matching any "
         "character (a -> b -> a)"},
        {"root ::= \"a\" \\", "grammar: line 1, column 14: unexpected '\\'"},
        {"root ::= \"a\" |\nb ::= \"c\"",
         "grammar: line 2, column 3: '::=' inside a rule (a new rule must start on its own line)"},
    };
    for (const bad& b : cases) {
        CAPTURE(b.text);
        CHECK(test::code_of([&] { (void)parse_gbnf(b.text); }) == status::invalid_argument);
        CHECK(error_of(b.text) == b.message);
    }
}

TEST_CASE("a grammar past the size limits is refused as unsupported, naming the place") {
    // 300 nested groups: the parser recurses once per group.
    const std::string deep = "root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')');
    CHECK(test::code_of([&] { (void)parse_gbnf(deep); }) == status::unsupported);
    CHECK(error_of(deep) == "grammar: line 1, column 266: groups nested deeper than 256");
    CHECK_NOTHROW(
        (void)parse_gbnf("root ::= " + std::string(256, '(') + "\"a\"" + std::string(256, ')')));
    // Nested counts multiply: 10^8 copies of "a".
    const std::string repeated = "root ::= (\"a\"{10000}){10000}";
    CHECK(test::code_of([&] { (void)parse_gbnf(repeated); }) == status::unsupported);
    CHECK(error_of(repeated) ==
          "grammar: line 1, column 22: repetitions make the grammar larger than 1048576 elements");
    CHECK_NOTHROW((void)parse_gbnf("root ::= (\"a\"{100}){100}"));
}

TEST_CASE("a long chain of rules nullable through the next, written last first, is nullable") {
    // r0 ::= r1, r1 ::= r2, ..., each defined before the rule that makes it nullable: the left
    // recursion check must see that x* repeats something that can match empty text.
    std::string text = "root ::= x*\nx ::= r0 \"b\"?\n";
    constexpr int n = 5000;
    for (int i = 0; i < n; ++i)
        text.append("r")
            .append(std::to_string(i))
            .append(" ::= r")
            .append(std::to_string(i + 1))
            .append("\n");
    text.append("r").append(std::to_string(n)).append(" ::= \"a\"?\n");
    CHECK(error_of(text) == "grammar: line 1, column 11: repeated item can match empty text, so "
                            "it could repeat forever");
}
