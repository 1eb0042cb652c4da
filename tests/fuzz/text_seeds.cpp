// The seeds of the text-input targets: grammars (hand-written ones and what the JSON schema
// converter writes), JSON schemas of every supported keyword, the chat formats by name and by
// Jinja text, and pi-server request bodies of each route.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_format.hpp"
#include "grammar/json_schema.hpp"
#include "seeds.hpp"

namespace fs = std::filesystem;

namespace pi::fuzz {

namespace {

// Every supported keyword at least once; all of them convert.
const std::vector<std::pair<const char*, std::string_view>>& schemas() {
    static const std::vector<std::pair<const char*, std::string_view>> all = {
        {"person", R"({"type": "object", "properties": {"name": {"type": "string", "minLength": 1,
            "maxLength": 20}, "age": {"type": "integer"}, "tags": {"type": "array", "items":
            {"type": "string"}, "maxItems": 3}}, "required": ["name"]})"},
        {"any-of", R"({"anyOf": [{"type": "number"}, {"type": ["boolean", "null"]}]})"},
        {"enum", R"({"enum": ["red", "green", 1, null, {"a": [1]}]})"},
        {"const", R"({"const": {"k": "v\n\u00e9"}})"},
        {"array-of-objects", R"({"type": "array", "items": {"type": "object", "properties":
            {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["y"],
            "additionalProperties": false}, "minItems": 1, "maxItems": 4})"},
        {"annotated", R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "s",
            "title": "t", "description": "d", "$comment": "c", "default": "x", "examples": ["y"],
            "type": "string"})"},
        {"any-object", R"({"type": "object"})"},
        {"empty", "{}"},
        {"true", "true"},
    };
    return all;
}

// Text, then NUL-separated probe texts (grammar_fuzz.cpp).
std::string grammar_input(std::string_view gbnf, const std::vector<std::string_view>& probes) {
    std::string out(gbnf);
    for (const std::string_view p : probes) {
        out += '\0';
        out += p;
    }
    return out;
}

void write(const fs::path& path, std::string_view text) {
    write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

} // namespace

void write_grammar_seeds(const fs::path& dir) {
    write(dir / "json-value.gbnf",
          grammar_input(json_value_gbnf(), {R"({"a": [1, 2.5e3, true, null, "x\u00e9"]})", "["}));
    write(dir / "schema-person.gbnf",
          grammar_input(json_schema_to_gbnf(schemas()[0].second),
                        {R"({"name": "Ann", "tags": ["a"]})", R"({"age": 3})"}));
    write(dir / "schema-array.gbnf", grammar_input(json_schema_to_gbnf(schemas()[4].second),
                                                   {R"([{"y": 1}, {"x": 2, "y": -0.5}])"}));
    write(dir / "arithmetic.gbnf", grammar_input("root ::= expr\nexpr ::= term (\"+\" term)*\n"
                                                 "term ::= [0-9]+ | \"(\" expr \")\"\n",
                                                 {"1+(2+3)", "1+", "(("}));
    write(dir / "classes-and-counts.gbnf",
          grammar_input("root ::= [^\\n]{2,5} \"\\u00e9\" [\\x41-\\x5A]? (\"ab\" | \"cd\"){,3} "
                        "\"\\U0001F600\"{0,1} .\n",
                        {"xy\xC3\xA9"
                         "Aabcd!",
                         "xy\xC3"}));
    write(dir / "lines-and-comments.gbnf",
          grammar_input("# a comment\nroot ::=\n  \"a\" word\n  | \"b\" (word\n  | \"-\")\n"
                        "word ::= [a-z_]+ # trailing\n",
                        {"ahello", "b-", "c"}));
    write(dir / "words.gbnf", grammar_input("root ::= word (\" \" word)* \".\"?\n"
                                            "word ::= [a-z]{1,8}\n",
                                            {"in the beginning.", "IN"}));
}

void write_json_schema_seeds(const fs::path& dir) {
    for (const auto& [name, schema] : schemas())
        write(dir / (std::string(name) + ".json"), schema);
}

void write_chat_seeds(const fs::path& dir) {
    // Mode byte: bit 0 add_assistant, the rest the fallback format; then the NUL-separated
    // template and messages.
    static constexpr char messages[] =
        "\0system\0Be brief.\0user\0Hi\0assistant\0  Hello!  \0user\0Who are you?";
    const std::string conversation(messages, sizeof messages - 1);
    for (int k = 0; chat_format_name(static_cast<chat_format>(k)) != "?"; ++k) {
        const std::string_view name = chat_format_name(static_cast<chat_format>(k));
        write_text(dir / (std::string(name) + ".chat"), static_cast<uint8_t>(k & 1),
                   std::string(name) + conversation);
    }
    // Jinja texts, recognised by the substrings llama.cpp's detection looks for.
    const std::vector<std::pair<const char*, const char*>> templates = {
        {"jinja-chatml", "{% for m in messages %}{{ '<|im_start|>' + m['role'] }}{% endfor %}"},
        {"jinja-llama2-sys", "{{ bos_token }}[INST] <<SYS>>\\n{{ system }}<</SYS>>"},
        {"jinja-llama2-strip", "[INST] {{ message['content'].strip() }} [/INST]"},
        {"jinja-mistral-v7", "{{ '[SYSTEM_PROMPT]' }}[INST]{{ m }}[/INST]"},
        {"jinja-mistral-v1", "{{ ' [INST] ' + system_message }} [INST]"},
        {"jinja-zephyr", "{{ '<|user|>' }}\\n{{ m }}<|endoftext|>"},
        {"jinja-vicuna", "{{ 'USER: ' + m }}\\nASSISTANT: "},
        {"jinja-llama3", "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}"},
    };
    for (const auto& [name, text] : templates)
        write_text(dir / (std::string(name) + ".chat"), 1, text + conversation);
}

void write_server_request_seeds(const fs::path& dir) {
    // Mode byte: bits 0-1 the route, bits 2-4 the --chat-template (server_request_fuzz.cpp).
    constexpr uint8_t chat = 0, completion = 1, tokenize = 2, detokenize = 3;
    constexpr auto tmpl = [](int index) { return static_cast<uint8_t>(index << 2); };
    write_text(dir / "chat.json", chat | tmpl(1),
               R"({"model": "x", "messages": [{"role": "system", "content": "Be brief."},
               {"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0.7,
               "stop": ["\n"], "logprobs": true, "top_logprobs": 2, "stream": false})");
    write_text(dir / "chat-json-schema.json", chat | tmpl(3),
               R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Name?"}]}],
               "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema":
               {"type": "object", "properties": {"name": {"type": "string"}},
               "required": ["name"]}}}, "max_completion_tokens": 12})");
    write_text(dir / "chat-grammar.json", chat | tmpl(4),
               R"({"messages": [{"role": "developer", "content": "x"}, {"role": "user",
               "content": "y"}, {"role": "assistant", "content": null}], "grammar":
               "root ::= [a-z]+", "samplers": ["top_k", "temperature", "dry"], "top_k": 5,
               "mirostat": 2, "mirostat_tau": 4, "seed": 42, "logit_bias": {"5": -100}})");
    write_text(dir / "chat-jinja.json", chat | tmpl(7),
               R"({"messages": [{"role": "user", "content": "Hi"}], "n": 1, "top_p": 0.9,
               "min_p": 0.1, "typical_p": 0.95, "presence_penalty": 0.5, "frequency_penalty":
               0.5, "response_format": {"type": "json_object"}, "ignore_eos": true})");
    write_text(dir / "completion.json", completion,
               R"({"prompt": "In the beginning", "max_tokens": 4, "echo": true, "logprobs": 1,
               "dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2,
               "dry_penalty_last_n": -1, "dry_sequence_breakers": ["\n", ":"], "stream": true,
               "stream_options": {"include_usage": true}, "cache_prompt": true})");
    write_text(dir / "completion-tokens.json", completion,
               R"({"prompt": [1, 10, 20], "n_predict": 2, "json_schema": {"type": "array",
               "items": {"type": "integer"}, "maxItems": 2}, "xtc_probability": 0.5,
               "xtc_threshold": 0.1, "repeat_penalty": 1.1, "repeat_last_n": 16})");
    write_text(dir / "tokenize.json", tokenize,
               R"({"content": "Hello <s> world", "add_special": true, "parse_special": true,
               "with_pieces": true})");
    write_text(dir / "detokenize.json", detokenize, R"({"tokens": [1, 10, 20, 300]})");
}

} // namespace pi::fuzz
