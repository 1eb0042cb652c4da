// The BPE pre-tokenizer's words under Falcon's and GPT-2's rules, and the Unicode classes they
// rest on (docs/tokenizer.md, "BPE").
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/unicode_classes.hpp"

namespace {

using words = std::vector<std::string>;

words split(pi::bpe_pre rules, std::string_view text) {
    std::vector<std::string_view> views;
    pi::pre_tokenize(rules, text, views);
    return words(views.begin(), views.end());
}

words falcon(std::string_view text) {
    return split(pi::bpe_pre::falcon, text);
}

words gpt2(std::string_view text) {
    return split(pi::bpe_pre::gpt2, text);
}

} // namespace

TEST_CASE("both rules split letters, numbers, other characters and spaces alike") {
    for (const pi::bpe_pre rules : {pi::bpe_pre::falcon, pi::bpe_pre::gpt2}) {
        CAPTURE(static_cast<int>(rules));
        CHECK(split(rules, "Hello, world!") == words{"Hello", ",", " world", "!"});
        CHECK(split(rules, "a  b") == words{"a", " ", " b"});
        CHECK(split(rules, "a\n\nb") == words{"a", "\n", "\n", "b"});
        CHECK(split(rules, "x   ") == words{"x", "   "});
        CHECK(split(rules, "\t\n") == words{"\t\n"});
        CHECK(split(rules, "w048 7tuijk") == words{"w", "048", " 7", "tuijk"});
        CHECK(split(rules, "\xD0\x9F\xD1\x80\xD0\xB8 \xD0\xBC\xD0\xB8\xD1\x80") ==
              words{"\xD0\x9F\xD1\x80\xD0\xB8", " \xD0\xBC\xD0\xB8\xD1\x80"}); // "При мир"
        CHECK(split(rules, "\xE6\x88\x91"
                           "apple") == words{"\xE6\x88\x91"
                                             "apple"}); // CJK is a letter
        CHECK(split(rules, "\xE3\x80\x80"
                           "a") == words{"\xE3\x80\x80", "a"}); // U+3000 is a space
        CHECK(split(rules, "\xF0\x9F\x9A\x80 x") == words{"\xF0\x9F\x9A\x80", " x"});
        CHECK(split(rules, "").empty());
    }
}

TEST_CASE("GPT-2 keeps contractions and a leading space with punctuation") {
    CHECK(gpt2("I've been") == words{"I", "'ve", " been"});
    CHECK(gpt2("he's 'll 'RE") == words{"he", "'s", " '", "ll", " '", "RE"});
    CHECK(gpt2(" (x)") == words{" (", "x", ")"});
    CHECK(gpt2("3333333") == words{"3333333"});
    CHECK(gpt2("a$+b") == words{"a", "$+", "b"});
}

TEST_CASE("Falcon isolates runs of punctuation, contractions included") {
    CHECK(falcon("I've") == words{"I", "'", "ve"});
    CHECK(falcon(" (x)") == words{" ", "(", "x", ")"});
    CHECK(falcon("''''``\"\"....!!") == words{"''''``\"\"....!!"});
    CHECK(falcon("a$+<=>^~|`b") == words{"a", "$+<=>^~|`", "b"});
    CHECK(falcon("x \xE3\x80\x82y") == words{"x", " ", "\xE3\x80\x82", "y"}); // U+3002 punct
    // Symbols are not punctuation: "€" joins its space, "©" too.
    CHECK(falcon(" \xE2\x82\xAC \xC2\xA9") == words{" \xE2\x82\xAC", " \xC2\xA9"});
}

TEST_CASE("Falcon cuts digit runs into groups of three from the left") {
    CHECK(falcon("3") == words{"3"});
    CHECK(falcon("333") == words{"333"});
    CHECK(falcon("3333") == words{"333", "3"});
    CHECK(falcon("33333333") == words{"333", "333", "33"});
    CHECK(falcon(" 1234") == words{" ", "123", "4"});
    CHECK(falcon("3.3") == words{"3", ".", "3"});
    // Other decimal digits are numbers but not cut: only ASCII 0-9 are.
    CHECK(falcon("\xD9\xA3\xD9\xA3\xD9\xA3\xD9\xA3") == words{"\xD9\xA3\xD9\xA3\xD9\xA3\xD9\xA3"});
}

TEST_CASE("invalid UTF-8 bytes are kept, each an other character") {
    CHECK(falcon("a\xFF\xFE"
                 "b") == words{"a", "\xFF\xFE", "b"});
    CHECK(falcon("a \x85") == words{"a", " \x85"}); // a lone 0x85 byte is not U+0085
    CHECK(falcon("ab\xE2\x82") == words{"ab", "\xE2\x82"});
    std::string joined;
    for (const std::string& w : falcon("x\xC3(\xF0\x9F\x98 12\xFF"))
        joined += w;
    CHECK(joined == "x\xC3(\xF0\x9F\x98 12\xFF");
}

TEST_CASE("the generated tables classify code points by general category and White_Space") {
    using pi::unicode::class_of;
    using pi::unicode::cp_class;
    CHECK(class_of('A') == cp_class::letter);
    CHECK(class_of(0xE9) == cp_class::letter);   // é
    CHECK(class_of(0x4E00) == cp_class::letter); // CJK
    CHECK(class_of('7') == cp_class::number);
    CHECK(class_of(0x663) == cp_class::number);  // Arabic-Indic three (Nd)
    CHECK(class_of(0x216B) == cp_class::number); // Roman twelve (Nl)
    CHECK(class_of(0xB2) == cp_class::number);   // superscript two (No)
    CHECK(class_of('_') == cp_class::punctuation);
    CHECK(class_of(0x3002) == cp_class::punctuation);
    CHECK(class_of(0x2014) == cp_class::punctuation); // em dash
    CHECK(class_of('$') == cp_class::other);          // Sc
    CHECK(class_of(0x20AC) == cp_class::other);       // €
    CHECK(class_of(0x1F680) == cp_class::other);      // emoji
    CHECK(class_of(0x378) == cp_class::other);        // unassigned
    CHECK(class_of(0x10FFFF) == cp_class::other);
    CHECK(class_of(0x110000) == cp_class::other);
    for (const char32_t cp :
         {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00A0', U'\u1680', U'\u2000',
          U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'}) {
        CAPTURE(static_cast<uint32_t>(cp));
        CHECK(class_of(cp) == cp_class::space);
    }
    CHECK(class_of(0x1C) == cp_class::other);   // Python's isspace() says yes; White_Space no
    CHECK(class_of(0x200B) == cp_class::other); // zero-width space is Cf
}
