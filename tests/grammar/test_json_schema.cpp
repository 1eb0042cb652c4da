// JSON schema -> GBNF: what the grammar accepts, the errors, and the promise that a generation
// under a schema always parses and satisfies it (random walks over allowed tokens).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <random>
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
using json = nlohmann::json;

namespace {

bool schema_accepts(const std::string& schema, const std::string& text) {
    const grammar g = parse_gbnf(json_schema_to_gbnf(schema));
    grammar_matcher m(g);
    return m.feed(text) && m.may_end();
}

const char* const person = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "minItems": 1,
             "maxItems": 3},
    "role": {"enum": ["admin", "user", 7, null]},
    "active": {"type": "boolean"},
    "pet": {"type": "object", "properties": {"kind": {"const": "cat"},
                                             "legs": {"type": ["integer", "null"]}},
            "required": ["kind"]}
  },
  "required": ["name", "age", "tags"]
})";

// Checks one generated text against `person`.
void check_person(const std::string& text) {
    CAPTURE(text);
    const json j = json::parse(text); // throws, failing the test, if it does not parse
    REQUIRE(j.is_object());
    REQUIRE(j.contains("name"));
    CHECK(j["name"].is_string());
    REQUIRE(j.contains("age"));
    CHECK(j["age"].is_number_integer());
    REQUIRE(j.contains("tags"));
    REQUIRE(j["tags"].is_array());
    CHECK(j["tags"].size() >= 1);
    CHECK(j["tags"].size() <= 3);
    for (const json& t : j["tags"])
        CHECK(t.is_string());
    if (j.contains("height")) CHECK(j["height"].is_number());
    if (j.contains("role"))
        CHECK(
            (j["role"] == "admin" || j["role"] == "user" || j["role"] == 7 || j["role"].is_null()));
    if (j.contains("active")) CHECK(j["active"].is_boolean());
    if (j.contains("pet")) {
        CHECK(j["pet"]["kind"] == "cat");
        if (j["pet"].contains("legs"))
            CHECK((j["pet"]["legs"].is_number_integer() || j["pet"]["legs"].is_null()));
        for (const auto& [key, value] : j["pet"].items())
            CHECK((key == "kind" || key == "legs"));
    }
    for (const auto& [key, value] : j.items())
        CHECK((key == "name" || key == "age" || key == "height" || key == "tags" || key == "role" ||
               key == "active" || key == "pet"));
}

struct walk_result {
    std::string text;
    bool ended = false;
};

// Draws uniformly among the allowed candidates until an end-of-generation token is drawn.
walk_result random_walk(token_constraint& g, const tokenizer& vocab, std::mt19937& rng,
                        int max_steps) {
    g.reset();
    walk_result out;
    for (int step = 0; step < max_steps; ++step) {
        candidate_list c;
        for (int32_t id = 0; id < vocab.n_tokens(); ++id)
            c.tokens.push_back({id, 0.0f, 0.0f});
        g.apply(c);
        std::vector<int32_t> choices;
        for (const token_candidate& t : c.tokens)
            if (!std::isinf(t.logit)) choices.push_back(t.id);
        REQUIRE_MESSAGE(!choices.empty(), "no token allowed after: ", out.text);
        const int32_t pick = choices[rng() % choices.size()];
        g.accept(pick);
        if (vocab.is_eog(pick)) {
            CHECK(g.may_end());
            out.ended = true;
            return out;
        }
        out.text += vocab.piece(pick);
    }
    return out;
}

// Every printable ASCII character, a few words, and bytes that split 'é' and '中'.
std::vector<std::string> json_toy_texts() {
    std::vector<std::string> t;
    for (char c = 0x21; c < 0x7F; ++c)
        t.emplace_back(1, c);
    for (const char* s :
         {"\xE2\x96\x81",   "<0x0A>",  "<0xC3>", "<0xA9>",   "<0xE4>", "<0xB8>", "<0xAD>",
          "true",           "false",   "null",   "\"name\"", "\":",    "\",",    "\xE2\x96\x81{",
          "\xE2\x96\x81\"", "12",      "-3",     "e+",       "\\u00",  "\\n",    "adm",
          "in\"",           "\xC3\xA9"})
        t.emplace_back(s);
    return t;
}

} // namespace

TEST_CASE("objects: required keys, optional keys in order, no others") {
    const std::string s = R"({"type": "object", "properties": {"a": {"type": "integer"},
        "b": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["b"]})";
    CHECK(schema_accepts(s, R"({"b": "x"})"));
    CHECK(schema_accepts(s, R"({"a": 1, "b": "x", "c": true})"));
    CHECK(schema_accepts(s, R"({"a":-20,"b":""})"));
    CHECK(schema_accepts(s, R"({"b": "x", "c": false})"));
    CHECK(schema_accepts(s, "{\n  \"b\": \"x\"\n}"));
    CHECK_FALSE(schema_accepts(s, R"({})"));
    CHECK_FALSE(schema_accepts(s, R"({"a": 1})"));
    CHECK_FALSE(schema_accepts(s, R"({"b": "x", "d": 1})"));
    CHECK_FALSE(schema_accepts(s, R"({"b": 1})"));
    CHECK_FALSE(schema_accepts(s, R"({"b": "x",})"));
    CHECK_FALSE(schema_accepts(s, R"({"a": 1.5, "b": "x"})"));
}

TEST_CASE("an object schema that names no properties takes any object, unless it forbids them") {
    CHECK(schema_accepts(R"({"type": "object"})", "{}"));
    CHECK(schema_accepts(R"({"type": "object"})", R"({"a": 1, "b": {"c": [true, null, "x"]}})"));
    CHECK_FALSE(schema_accepts(R"({"type": "object"})", "[]"));
    CHECK_FALSE(schema_accepts(R"({"type": "object"})", R"({"a": })"));
    const std::string closed = R"({"type": "object", "additionalProperties": false})";
    CHECK(schema_accepts(closed, "{}"));
    CHECK_FALSE(schema_accepts(closed, R"({"a": 1})"));
}

TEST_CASE("arrays: items and counts") {
    const std::string s =
        R"({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 3})";
    CHECK_FALSE(schema_accepts(s, "[1]"));
    CHECK(schema_accepts(s, "[1, 2.5]"));
    CHECK(schema_accepts(s, "[1,2,-3e5]"));
    CHECK_FALSE(schema_accepts(s, "[1,2,3,4]"));
    CHECK_FALSE(schema_accepts(s, "[1,\"x\"]"));
    CHECK(schema_accepts(R"({"type": "array"})", R"([1, "x", {"k": [null]}])"));
    CHECK(schema_accepts(R"({"type": "array"})", "[]"));
    CHECK(schema_accepts(R"({"type": "array", "maxItems": 0})", "[]"));
    CHECK_FALSE(schema_accepts(R"({"type": "array", "maxItems": 0})", "[1]"));
}

TEST_CASE("strings, enums, const, type lists and anyOf") {
    CHECK(schema_accepts(R"({"type": "string", "minLength": 2, "maxLength": 3})", R"("ab")"));
    CHECK(schema_accepts(R"({"type": "string", "minLength": 2, "maxLength": 3})", R"("a\nb")"));
    CHECK_FALSE(
        schema_accepts(R"({"type": "string", "minLength": 2, "maxLength": 3})", R"("abcd")"));
    CHECK_FALSE(schema_accepts(R"({"type": "string", "minLength": 2})", R"("a")"));
    CHECK(schema_accepts(R"({"enum": ["red", "green", 3, null]})", R"("green")"));
    CHECK(schema_accepts(R"({"enum": ["red", "green", 3, null]})", "3"));
    CHECK_FALSE(schema_accepts(R"({"enum": ["red", "green"]})", R"("blue")"));
    CHECK(schema_accepts(R"({"const": {"a": "q\"uote"}})", R"({"a":"q\"uote"})"));
    CHECK(schema_accepts(R"({"type": ["string", "null"]})", "null"));
    CHECK_FALSE(schema_accepts(R"({"type": ["string", "null"]})", "1"));
    CHECK(schema_accepts(R"({"anyOf": [{"type": "integer"}, {"type": "boolean"}]})", "true"));
    CHECK(schema_accepts("{}", R"({"any": ["thing", 1]})"));
    CHECK(schema_accepts("true", "null"));
    CHECK(schema_accepts(R"({"type": "string"})", "\"h\xC3\xA9 \\u00e9\""));
    CHECK_FALSE(schema_accepts(R"({"type": "string"})", R"("\ud800")"));
}

TEST_CASE("unsupported keywords and malformed schemas") {
    const auto code = [](const std::string& s) {
        return test::code_of([&] { (void)json_schema_to_gbnf(s); });
    };
    const auto message = [](const std::string& s) {
        return test::message_of([&] { (void)json_schema_to_gbnf(s); });
    };
    CHECK(code(R"({"type": "string", "pattern": "a+"})") == status::unsupported);
    CHECK(message(R"({"type": "string", "pattern": "a+"})") ==
          "json schema: keyword 'pattern' (at root) is not supported");
    CHECK(message(R"({"properties": {"x": {"$ref": "#/a"}}})") ==
          "json schema: keyword '$ref' (at root-x) is not supported");
    CHECK(code(R"({"type": "object", "additionalProperties": true})") == status::unsupported);
    CHECK(code(R"({"type": "array", "items": [{"type": "string"}]})") == status::unsupported);
    CHECK(code(R"({"type": "str)") == status::invalid_argument);
    CHECK(message(R"({"type": "str)").rfind("json schema: not valid JSON: ", 0) == 0);
    // A number past a double is nlohmann-json's out_of_range, not a parse_error (json_schema_fuzz).
    CHECK(code(R"({"const": -1.5e+100013})") == status::invalid_argument);
    CHECK(message(R"({"const": 1e309})").rfind("json schema: not valid JSON: ", 0) == 0);
    CHECK(message(R"({"type": "text"})") == "json schema: unknown type 'text' at root");
    CHECK(message(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})") ==
          "json schema: required property 'b' at root is not among its properties");
    CHECK(message(R"({"type": "array", "minItems": 3, "maxItems": 2})") ==
          "json schema: maxItems 2 is below minItems 3 at root");
    CHECK(message(R"({"type": "array", "minItems": -1})") ==
          "json schema: 'minItems' must be a non-negative integer, not -1");
    CHECK(message(R"({"enum": []})") == "json schema: 'enum' at root must be a non-empty array");
    CHECK(code("[1]") == status::invalid_argument);
    CHECK(code("false") == status::invalid_argument);
}

TEST_CASE("property names and enum strings with quotes and backslashes are escaped") {
    const std::string s = R"({"type": "object", "properties": {"a \"b\\": {"enum": ["x\ny"]}},
                              "required": ["a \"b\\"]})";
    CHECK(schema_accepts(s, R"({"a \"b\\": "x\ny"})"));
}

TEST_CASE("random generations under a schema always parse and satisfy it (toy vocabulary)") {
    const auto vocab = test::toy_tokenizer(json_toy_texts());
    const auto g = make_grammar_constraint(json_schema_to_gbnf(person), "root", *vocab);
    std::mt19937 rng(20261202);
    int ended = 0;
    for (int run = 0; run < 200; ++run) {
        const walk_result r = random_walk(*g, *vocab, rng, 4000);
        if (!r.ended) continue;
        ++ended;
        check_person(r.text);
    }
    CHECK(ended >= 190);
}

TEST_CASE("random generations under a schema always parse and satisfy it (fixture vocabulary)") {
    const auto vocab = tokenizer::from_gguf(*gguf::file::open(test::fixture_vocab_path()));
    const auto g = make_grammar_constraint(json_schema_to_gbnf(person), "root", *vocab);
    std::mt19937 rng(7);
    int ended = 0;
    for (int run = 0; run < 100; ++run) {
        const walk_result r = random_walk(*g, *vocab, rng, 3000);
        if (!r.ended) continue;
        ++ended;
        check_person(r.text);
    }
    CHECK(ended >= 95);
}

TEST_CASE("random generations under the JSON value grammar parse whenever they end") {
    const auto vocab = test::toy_tokenizer(json_toy_texts());
    const auto g = make_grammar_constraint(json_value_gbnf(), "root", *vocab);
    std::mt19937 rng(5);
    int ended = 0;
    for (int run = 0; run < 200; ++run) {
        const walk_result r = random_walk(*g, *vocab, rng, 2000);
        if (!r.ended) continue;
        ++ended;
        CAPTURE(r.text);
        CHECK(json::accept(r.text));
    }
    CHECK(ended >= 190);
}

TEST_CASE("a schema nested too deep or growing too large is refused as unsupported") {
    const auto code = [](const std::string& s) {
        return test::code_of([&] { (void)json_schema_to_gbnf(s); });
    };
    const std::string deep_const =
        R"({"const": )" + std::string(200, '[') + std::string(200, ']') + "}";
    CHECK(code(deep_const) == status::unsupported);
    CHECK(test::message_of([&] { (void)json_schema_to_gbnf(deep_const); }) ==
          "json schema: nested deeper than 128 levels");
    std::string deep_properties = R"({"type": "string"})";
    for (int i = 0; i < 100; ++i)
        deep_properties = R"({"type": "object", "properties": {"a": )" + deep_properties + "}}";
    CHECK(code(deep_properties) == status::unsupported);
    CHECK(code(R"({"const": )" + std::string(60, '[') + std::string(60, ']') + "}") == status::ok);
    // minItems of minLength: the item is written inline, so 10^8 characters, more than the
    // grammar parser takes.
    const std::string large =
        R"({"type": "array", "minItems": 10000, "items": {"type": "string", "minLength": 10000}})";
    CHECK(code(large) == status::unsupported);
    CHECK(test::message_of([&] {
              (void)json_schema_to_gbnf(large);
          }).starts_with("json schema: grammar: line "));
}
