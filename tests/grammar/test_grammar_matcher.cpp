// The matcher over UTF-8 code points: complete matches, live prefixes and rejections.
#include <doctest/doctest.h>

#include <string>

#include "grammar/grammar.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/json_schema.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {

// Whether `text` is a complete match; prefixes that can still match give "prefix".
std::string verdict(const std::string& gbnf, const std::string& text) {
    const grammar g = parse_gbnf(gbnf);
    grammar_matcher m(g);
    if (!m.feed(text)) return "rejected";
    return m.may_end() ? "match" : "prefix";
}

const char* const arithmetic = R"g(
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g";

const char* const chess = R"g(
root   ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")+
move   ::= (pawn | nonpawn | castle) [+#]?
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
pawn   ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBKQR])?
castle ::= "O-O" "-O"?
)g";

} // namespace

TEST_CASE("literals, classes and alternation") {
    const std::string g = R"(root ::= "ab" [0-9] | "c" . "d")";
    CHECK(verdict(g, "ab7") == "match");
    CHECK(verdict(g, "ab") == "prefix");
    CHECK(verdict(g, "abx") == "rejected");
    CHECK(verdict(g, "c\nd") == "match");
    CHECK(verdict(g, "cé d") == "rejected");
    CHECK(verdict(g, "céd") == "match");
    CHECK(verdict(g, "ab77") == "rejected");
}

TEST_CASE("repetitions * + ? and counted") {
    CHECK(verdict(R"(root ::= "a"*)", "") == "match");
    CHECK(verdict(R"(root ::= "a"*)", "aaaa") == "match");
    CHECK(verdict(R"(root ::= "a"+)", "") == "prefix");
    CHECK(verdict(R"(root ::= "ab"+)", "ababa") == "prefix");
    CHECK(verdict(R"(root ::= "ab"+)", "abab") == "match");
    CHECK(verdict(R"(root ::= "a"? "b")", "b") == "match");
    CHECK(verdict(R"(root ::= "a"? "b")", "aab") == "rejected");
    const std::string counted = R"(root ::= [x]{2,4} "." [y]{3} "." [z]{1,})";
    CHECK(verdict(counted, "xx.yyy.z") == "match");
    CHECK(verdict(counted, "xxxx.yyy.zzzz") == "match");
    CHECK(verdict(counted, "x.") == "rejected");
    CHECK(verdict(counted, "xxxxx") == "rejected");
    CHECK(verdict(counted, "xx.yy.") == "rejected");
    CHECK(verdict(counted, "xx.yyy.") == "prefix");
    CHECK(verdict(R"(root ::= "a"{0})", "") == "match");
    CHECK(verdict(R"(root ::= "a"{,2} "b")", "b") == "match");
    CHECK(verdict(R"(root ::= "a"{ , 2 } "b")", "aab") == "match");
    CHECK(verdict(R"(root ::= "a"{,2} "b")", "aaab") == "rejected");
    CHECK(verdict(R"(root ::= "a"{0,2} "b")", "aab") == "match");
    CHECK(verdict(R"(root ::= "a"{0,2} "b")", "aaab") == "rejected");
}

TEST_CASE("negated classes and code points beyond ASCII") {
    const std::string g = R"(root ::= "\"" [^"\\]* "\"")";
    CHECK(verdict(g, "\"héllo 🙂\"") == "match");
    CHECK(verdict(g, "\"a\\") == "rejected");
    CHECK(verdict(R"(root ::= [\u4e00-\u9fff]+)", "中文") == "match");
    CHECK(verdict(R"(root ::= [\u4e00-\u9fff]+)", "中a") == "rejected");
    CHECK(verdict(R"(root ::= "\U0001F642")", "🙂") == "match");
}

TEST_CASE("a code point split over feeds is completed by the next one") {
    const grammar g = parse_gbnf(R"(root ::= "é" "!")");
    grammar_matcher m(g);
    CHECK(m.feed("\xC3"));
    CHECK_FALSE(m.may_end());
    CHECK_FALSE(m.feed("\xC3")); // a lead byte where a continuation is due
    CHECK(m.feed("\xA9!"));
    CHECK(m.may_end());
    grammar_matcher other(g);
    CHECK_FALSE(other.feed("\xC4")); // U+0100..U+013F: none of them is 'é'
    CHECK_FALSE(other.feed("\xFF"));
    CHECK_FALSE(other.feed("\xED\xA0")); // only surrogates begin so
}

TEST_CASE("a failed feed leaves the state unchanged; reset starts over") {
    const grammar g = parse_gbnf(R"(root ::= "abc")");
    grammar_matcher m(g);
    CHECK(m.feed("ab"));
    CHECK_FALSE(m.feed("x"));
    CHECK(m.feed("c"));
    CHECK(m.may_end());
    m.reset();
    CHECK_FALSE(m.may_end());
    CHECK(m.feed("abc"));
}

TEST_CASE("the arithmetic grammar") {
    CHECK(verdict(arithmetic, "a+b=c\n") == "match");
    CHECK(verdict(arithmetic, "(x1 *22)/y= z\nq=1\n") == "match");
    CHECK(verdict(arithmetic, "a+=b\n") == "rejected");
    CHECK(verdict(arithmetic, "a+ b=c\n") == "rejected"); // no space after an operator
    CHECK(verdict(arithmetic, "(a+b=c\n") == "rejected");
    CHECK(verdict(arithmetic, "a+b") == "prefix");
}

TEST_CASE("the chess grammar") {
    CHECK(verdict(chess, "1. e4 e5\n2. Nf3 Nc6\n") == "match");
    CHECK(verdict(chess, "1. e4 e5\n2. O-O-O exd8=Q+\n12. Bxc6 dxc6\n") == "match");
    CHECK(verdict(chess, "1. e9") == "rejected");
    CHECK(verdict(chess, "1. e4 e5\n") == "prefix");
    CHECK(verdict(chess, "1. Zf3") == "rejected");
}

TEST_CASE("the JSON value grammar accepts JSON and rejects the rest") {
    const std::string g(json_value_gbnf());
    for (const char* ok : {"{}", "[]", "null", "true", "-0", "12.5e-3", "\"a\\u00e9\\n\"",
                           R"({"a": [1, 2, {"b": null}], "c": "d"})", "[\n  1,\n  2\n]"}) {
        CAPTURE(ok);
        CHECK(verdict(g, ok) == "match");
    }
    for (const char* bad :
         {"{,}", "[1,]", "01", "\"\\x\"", "{\"a\" 1}", "\"\\uD800\"", "nul!", "tru", "\"a\nb\""}) {
        CAPTURE(bad);
        CHECK(verdict(g, bad) != "match");
    }
}

namespace {

// r0 ::= r1 "b", r1 ::= r2 "b", ..., the last ::= "a": expanding the start walks the whole chain.
std::string rule_chain(int n) {
    std::string g = "root ::= r0\n";
    for (int i = 0; i < n; ++i)
        g.append("r")
            .append(std::to_string(i))
            .append(" ::= r")
            .append(std::to_string(i + 1))
            .append(" \"b\"\n");
    return g.append("r").append(std::to_string(n)).append(" ::= \"a\"\n");
}

} // namespace

TEST_CASE("a long chain of rules matches; one too long to expand is refused, not a crash") {
    const std::string g = rule_chain(2000);
    CHECK(verdict(g, "a" + std::string(2000, 'b')) == "match");
    CHECK(verdict(g, "ab") == "prefix");
    CHECK(verdict(g, "b") == "rejected");
    // 20000 deep: the expansion copies stacks of up to 20000 elements, past the bound of one step
    // (and past the thread's stack, were it recursive).
    const grammar deep = parse_gbnf(rule_chain(20000));
    CHECK(test::code_of([&] { grammar_matcher m(deep); }) == status::unsupported);
    CHECK(test::message_of([&] { grammar_matcher m(deep); }) ==
          "grammar: one matching step expands more than 4194304 stack elements; the grammar is "
          "too ambiguous or too deeply nested to match");
}

TEST_CASE("nested optional items reach each stack once") {
    // 60 nested "(...)?" reach the stack after them along 2^60 paths.
    const std::string g = "root ::= " + std::string(60, '(') + "\"a\"" + [] {
        std::string closes;
        for (int i = 0; i < 60; ++i)
            closes += ")?";
        return closes;
    }() + " \"b\"";
    CHECK(verdict(g, "ab") == "match");
    CHECK(verdict(g, "b") == "match");
    CHECK(verdict(g, "aab") == "rejected");
}

TEST_CASE("a grammar whose live stacks double with every character stops as unsupported") {
    const grammar g = parse_gbnf(R"(root ::= x
x ::= "a" x "b" | "a" x "c" | "")");
    grammar_matcher m(g);
    CHECK(m.feed("aaaa"));
    CHECK(m.stacks().size() > 16); // at least 2^4 ways to close
    CHECK(test::code_of([&] { (void)m.feed(std::string(20, 'a')); }) == status::unsupported);
    CHECK(test::message_of([&] { (void)m.feed(std::string(20, 'a')); }) ==
          "grammar: more than 4096 parse stacks are alive at once; the grammar is too ambiguous "
          "to match");
}
