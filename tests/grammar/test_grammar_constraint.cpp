// The grammar as a token constraint: exactly the tokens whose piece can continue the grammar
// keep their logits, end-of-generation only where the grammar may end.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "grammar/grammar.hpp"
#include "grammar/grammar_constraint.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/json_schema.hpp"
#include "support/test_support.hpp"
#include "toy_vocab.hpp"

using namespace pi;

namespace {

candidate_list all_tokens(int32_t n) {
    candidate_list c;
    for (int32_t id = 0; id < n; ++id)
        c.tokens.push_back({id, 0.0f, 0.0f});
    return c;
}

std::set<int32_t> allowed(const token_constraint& g, int32_t n_tokens) {
    candidate_list c = all_tokens(n_tokens);
    g.apply(c);
    std::set<int32_t> out;
    for (const token_candidate& t : c.tokens)
        if (!std::isinf(t.logit)) out.insert(t.id);
    return out;
}

// 3 "<0xC3>", 4 "<0xA9>", 5 "a", 6 "b", 7 "ab", 8 "▁a", 9 "c", 10 "abc", 11 "é", 12 "cab"
const std::vector<std::string> texts = {"<0xC3>",
                                        "<0xA9>",
                                        "a",
                                        "b",
                                        "ab",
                                        "\xE2\x96\x81"
                                        "a",
                                        "c",
                                        "abc",
                                        "\xC3\xA9",
                                        "cab"};

} // namespace

TEST_CASE("only pieces that continue the grammar are allowed, EOS once it may end") {
    const auto vocab = test::toy_tokenizer(texts);
    const int32_t n = vocab->n_tokens();
    const auto g = make_grammar_constraint(R"(root ::= ("ab")+ "c"?)", "root", *vocab);
    CHECK(allowed(*g, n) == std::set<int32_t>{5, 7, 10});
    CHECK_FALSE(g->may_end());
    g->accept(7);
    CHECK(g->may_end());
    CHECK(allowed(*g, n) == std::set<int32_t>{2, 5, 7, 9, 10});
    g->accept(5);
    CHECK(allowed(*g, n) == std::set<int32_t>{6});
    g->accept(6);
    g->accept(9);
    CHECK(allowed(*g, n) == std::set<int32_t>{2});
    g->accept(2);
}

TEST_CASE("a leading space is part of the piece") {
    const auto vocab = test::toy_tokenizer(texts);
    const auto g = make_grammar_constraint(R"(root ::= " a" | "cab")", "", *vocab);
    CHECK(allowed(*g, vocab->n_tokens()) == std::set<int32_t>{8, 9, 12});
}

TEST_CASE("byte tokens may end mid-character and the next one must complete it") {
    const auto vocab = test::toy_tokenizer(texts);
    const int32_t n = vocab->n_tokens();
    const auto g = make_grammar_constraint(R"(root ::= "é"+)", "root", *vocab);
    CHECK(allowed(*g, n) == std::set<int32_t>{3, 11});
    g->accept(3);
    CHECK_FALSE(g->may_end());
    CHECK(allowed(*g, n) == std::set<int32_t>{4});
    g->accept(4);
    CHECK(g->may_end());
    CHECK(allowed(*g, n) == std::set<int32_t>{2, 3, 11});
}

TEST_CASE("accept refuses forbidden tokens and keeps the state") {
    const auto vocab = test::toy_tokenizer(texts);
    const auto g = make_grammar_constraint(R"(root ::= "ab" "c")", "root", *vocab);
    CHECK(test::code_of([&] { g->accept(6); }) == status::invalid_argument);
    CHECK(test::message_of([&] { g->accept(2); }) ==
          "grammar: end-of-generation token 2 before the grammar is complete");
    CHECK(test::message_of([&] { g->accept(1); }) ==
          "grammar: token 1 ('') cannot continue the grammar here");
    CHECK(test::message_of([&] { g->accept(99); }) ==
          "grammar: token id 99 is outside the vocabulary of 13 tokens");
    g->accept(7);
    g->accept(9);
    CHECK(g->may_end());
    g->reset();
    CHECK_FALSE(g->may_end());
    CHECK(allowed(*g, vocab->n_tokens()) == std::set<int32_t>{5, 7, 10});
}

TEST_CASE("apply touches only forbidden candidates and works on a subset") {
    const auto vocab = test::toy_tokenizer(texts);
    const auto g = make_grammar_constraint(R"(root ::= "a" "b")", "root", *vocab);
    candidate_list c;
    c.tokens = {{7, 1.5f, 0.0f}, {6, 2.0f, 0.0f}, {5, -0.5f, 0.0f}};
    g->apply(c);
    CHECK(c.tokens[0].logit == 1.5f);
    CHECK(std::isinf(c.tokens[1].logit));
    CHECK(c.tokens[2].logit == -0.5f);
    candidate_list bad;
    bad.tokens = {{6, 1.0f, 0.0f}, {-1, 0.0f, 0.0f}};
    CHECK(test::code_of([&] { g->apply(bad); }) == status::invalid_argument);
    CHECK(bad.tokens[0].logit == 1.0f); // nothing changed before the bad id was found
}

TEST_CASE("a malformed grammar fails make_grammar_constraint") {
    const auto vocab = test::toy_tokenizer(texts);
    CHECK(test::message_of([&] { (void)make_grammar_constraint("root ::= [", "root", *vocab); }) ==
          "grammar: line 1, column 10: unterminated character class");
    CHECK(test::message_of([&] { (void)make_grammar_constraint("a ::= \"x\"", "b", *vocab); }) ==
          "grammar: line 1, column 1: missing root rule 'b'");
}

// On the fixture's 4096 tokens, along random walks through the JSON grammar, the allowed set is
// exactly the set of tokens whose piece the matcher accepts from the same state.
TEST_CASE("the allowed set equals the matcher's verdict token by token (fixture vocabulary)") {
    const auto vocab = tokenizer::from_gguf(*gguf::file::open(test::fixture_vocab_path()));
    const int32_t n = vocab->n_tokens();
    const std::string gbnf(json_value_gbnf());
    const grammar parsed = parse_gbnf(gbnf);
    const auto g = make_grammar_constraint(gbnf, "root", *vocab);
    std::vector<std::string> pieces;
    for (int32_t id = 0; id < n; ++id)
        pieces.push_back(vocab->piece(id));
    std::mt19937 rng(1234);
    for (int walk = 0; walk < 3; ++walk) {
        g->reset();
        grammar_matcher oracle(parsed);
        for (int step = 0; step < 25; ++step) {
            const std::set<int32_t> got = allowed(*g, n);
            std::set<int32_t> expected;
            for (int32_t id = 0; id < n; ++id) {
                if (vocab->is_eog(id)) {
                    if (oracle.may_end()) expected.insert(id);
                    continue;
                }
                grammar_matcher m = oracle;
                if (!pieces[id].empty() && m.feed(pieces[id])) expected.insert(id);
            }
            REQUIRE(got == expected);
            std::vector<int32_t> choices;
            for (const int32_t id : got)
                if (!vocab->is_eog(id)) choices.push_back(id);
            if (choices.empty()) break;
            const int32_t pick = choices[rng() % choices.size()];
            g->accept(pick);
            REQUIRE(oracle.feed(pieces[pick]));
        }
    }
}

// docs/grammar.md quotes this measurement: the mean apply() time over the whole vocabulary at
// states along random walks through the JSON grammar, in processor time (std::clock), which a
// loaded machine disturbs less than wall time. PI_GRAMMAR_BENCH_VOCAB names another GGUF
// vocabulary to measure (e.g. a 32000-token Llama one).
TEST_CASE("apply over a whole vocabulary under the JSON grammar is fast") {
    const char* other = std::getenv("PI_GRAMMAR_BENCH_VOCAB");
    const auto vocab =
        tokenizer::from_gguf(*gguf::file::open(other ? other : test::fixture_vocab_path()));
    const int32_t n = vocab->n_tokens();
    const auto g = make_grammar_constraint(json_value_gbnf(), "root", *vocab);
    std::mt19937 rng(99);
    std::clock_t spent = 0;
    int applies = 0;
    for (int walk = 0; walk < 30; ++walk) {
        g->reset();
        for (int step = 0; step < 40; ++step) {
            candidate_list c = all_tokens(n);
            const std::clock_t start = std::clock();
            g->apply(c);
            spent += std::clock() - start;
            ++applies;
            std::vector<int32_t> choices;
            for (const token_candidate& t : c.tokens)
                if (!std::isinf(t.logit) && !vocab->is_eog(t.id)) choices.push_back(t.id);
            if (choices.empty()) break;
            g->accept(choices[rng() % choices.size()]);
        }
    }
    const double ms = 1000.0 * static_cast<double>(spent) / CLOCKS_PER_SEC / applies;
    MESSAGE("grammar apply over ", n, " tokens: ", ms, " ms mean over ", applies, " steps");
    CHECK(ms < 50.0); // generous: a Release build takes well under a millisecond per 4096 tokens
}
