// Each schema becomes a GBNF expression; objects and arrays get rules of their own, named after
// the property path. The JSON primitives are shared rules, added once when first used.
#include "grammar/json_schema.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.hpp"
#include "support/error.hpp"

namespace pi {
namespace {

using json = nlohmann::ordered_json;

// The largest {m,n} count the GBNF parser takes (gbnf_parser.cpp).
constexpr uint64_t max_count = 10000;
// Deeper JSON would recurse as deep in nlohmann-json's dump (of const and enum values) and in the
// converter, past the end of the thread's stack for a hostile schema.
constexpr int max_depth = 128;

// Whitespace between tokens is bounded so that a constrained model cannot spin in it forever;
// numbers are bounded so that every match parses as a finite double (exponent below 100).
// Escapes \u exclude surrogates: a lone one is not valid JSON text.
struct primitive {
    const char* name;
    const char* body;
    std::vector<const char*> uses;
};
const std::vector<primitive>& primitives() {
    static const std::vector<primitive> all = {
        {"ws", R"(| " " | "\n" [ \t]{0,20})", {}},
        {"boolean", R"("true" | "false")", {}},
        {"null", R"("null")", {}},
        {"integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))", {}},
        {"number", R"(integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)", {"integer"}},
        {"hex", R"([0-9a-fA-F])", {}},
        {"char",
         R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] hex{3} | [dD] [0-7] hex{2})))",
         {"hex"}},
        {"string", R"("\"" char* "\"")", {"char"}},
        {"value",
         R"(object | array | string | number | boolean | null)",
         {"object", "array", "string", "number", "boolean", "null"}},
        {"object", R"("{" ws (member ("," ws member)*)? "}")", {"ws", "member"}},
        {"member", R"(string ws ":" ws value ws)", {"string", "ws", "value"}},
        {"array", R"("[" ws (value ws ("," ws value ws)*)? "]")", {"ws", "value"}},
    };
    return all;
}

const std::set<std::string> annotations = {"title",    "description", "$schema", "$id",
                                           "$comment", "default",     "examples"};
const std::set<std::string> understood = {
    "type",  "properties", "required",  "additionalProperties",
    "items", "minItems",   "maxItems",  "enum",
    "const", "minLength",  "maxLength", "anyOf"};

// A GBNF literal for `text`.
std::string literal(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        const auto b = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (b < 0x20 || b == 0x7F) {
            static const char digits[] = "0123456789ABCDEF";
            out += "\\x";
            out += digits[b >> 4];
            out += digits[b & 15];
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// The JSON text of a value, as a GBNF literal.
std::string literal_of(const json& value) {
    return literal(value.dump());
}

std::string repeat_suffix(uint64_t min, uint64_t max, bool unbounded) {
    if (unbounded) return min == 0 ? "*" : min == 1 ? "+" : concat("{", min, ",}");
    if (min == max) return concat("{", min, "}");
    return concat("{", min, ",", max, "}");
}

class schema_converter {
  public:
    std::string convert(const json& schema) {
        const std::string root = expression(schema, "root");
        std::string out = "root ::= ws " + root + "\n";
        use("ws");
        for (const auto& [name, body] : rules_)
            out += name + " ::= " + body + "\n";
        for (const primitive& p : primitives())
            if (used_.count(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
        return out;
    }

  private:
    std::vector<std::pair<std::string, std::string>> rules_;
    std::set<std::string> names_ = {"root"};
    std::set<std::string> used_;

    void use(const std::string& name) {
        if (!used_.insert(name).second) return;
        for (const primitive& p : primitives())
            if (p.name == name)
                for (const char* dependency : p.uses)
                    use(dependency);
    }

    std::string primitive_ref(const std::string& name) {
        use(name);
        return name;
    }

    // A fresh rule name from a property path; primitive names are taken already.
    std::string rule_name(const std::string& hint) {
        std::string base;
        for (const char c : hint)
            base += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
        if (base.empty()) base = "item";
        std::string name = base;
        for (int n = 2;
             names_.count(name) || std::any_of(primitives().begin(), primitives().end(),
                                               [&](const primitive& p) { return name == p.name; });
             ++n)
            name = base + "-" + std::to_string(n);
        names_.insert(name);
        return name;
    }

    std::string add_rule(const std::string& hint, std::string body) {
        const std::string name = rule_name(hint);
        rules_.emplace_back(name, std::move(body));
        return name;
    }

    static uint64_t count_of(const json& schema, const char* key, uint64_t fallback) {
        if (!schema.contains(key)) return fallback;
        const json& v = schema[key];
        if (!v.is_number_integer() || v.get<int64_t>() < 0)
            fail(status::invalid_argument, "json schema: '", key,
                 "' must be a non-negative integer, not ", v.dump());
        const auto n = v.get<uint64_t>();
        if (n > max_count)
            fail(status::unsupported, "json schema: '", key, "' = ", n, " is over ", max_count);
        return n;
    }

    std::string expression(const json& schema, const std::string& path) {
        if (schema.is_boolean()) {
            if (!schema.get<bool>())
                fail(status::invalid_argument, "json schema: 'false' at ", path,
                     " allows no value at all");
            return primitive_ref("value");
        }
        if (!schema.is_object())
            fail(status::invalid_argument, "json schema: the schema at ", path,
                 " must be an object or a boolean, not ", schema.dump());
        for (const auto& [key, value] : schema.items())
            if (!understood.count(key) && !annotations.count(key))
                fail(status::unsupported, "json schema: keyword '", key, "' (at ", path,
                     ") is not supported");
        if (schema.contains("const")) return literal_of(schema["const"]);
        if (schema.contains("enum")) return enumeration(schema["enum"], path);
        if (schema.contains("anyOf")) return any_of(schema["anyOf"], path);
        if (!schema.contains("type")) {
            if (schema.contains("properties") || schema.contains("required"))
                return object(schema, path);
            if (schema.contains("items") || schema.contains("minItems") ||
                schema.contains("maxItems"))
                return array(schema, path);
            if (schema.contains("minLength") || schema.contains("maxLength")) return string(schema);
            return primitive_ref("value");
        }
        const json& type = schema["type"];
        if (type.is_string()) return typed(schema, type.get<std::string>(), path);
        if (!type.is_array() || type.empty())
            fail(status::invalid_argument, "json schema: 'type' at ", path,
                 " must be a string or a non-empty array of strings");
        std::string out = "(";
        for (const json& t : type) {
            if (!t.is_string())
                fail(status::invalid_argument, "json schema: 'type' at ", path,
                     " holds a non-string ", t.dump());
            out += (out.size() > 1 ? " | " : "") + typed(schema, t.get<std::string>(), path);
        }
        return out + ")";
    }

    std::string typed(const json& schema, const std::string& type, const std::string& path) {
        if (type == "object") return object(schema, path);
        if (type == "array") return array(schema, path);
        if (type == "string") return string(schema);
        if (type == "number") return primitive_ref("number");
        if (type == "integer") return primitive_ref("integer");
        if (type == "boolean") return primitive_ref("boolean");
        if (type == "null") return primitive_ref("null");
        fail(status::invalid_argument, "json schema: unknown type '", type, "' at ", path);
    }

    std::string enumeration(const json& values, const std::string& path) {
        if (!values.is_array() || values.empty())
            fail(status::invalid_argument, "json schema: 'enum' at ", path,
                 " must be a non-empty array");
        std::string out = "(";
        for (const json& v : values)
            out += (out.size() > 1 ? " | " : "") + literal_of(v);
        return out + ")";
    }

    std::string any_of(const json& schemas, const std::string& path) {
        if (!schemas.is_array() || schemas.empty())
            fail(status::invalid_argument, "json schema: 'anyOf' at ", path,
                 " must be a non-empty array");
        std::string out = "(";
        size_t n = 0;
        for (const json& s : schemas)
            out += (out.size() > 1 ? " | " : "") + expression(s, concat(path, "-", n++));
        return out + ")";
    }

    std::string string(const json& schema) {
        const uint64_t min = count_of(schema, "minLength", 0);
        const bool unbounded = !schema.contains("maxLength");
        const uint64_t max = count_of(schema, "maxLength", 0);
        if (!unbounded && max < min)
            fail(status::invalid_argument, "json schema: maxLength ", max, " is below minLength ",
                 min);
        use("string");
        if (min == 0 && unbounded) return "string";
        if (max == 0 && !unbounded) return R"("\"\"")";
        return "\"\\\"\" char" + repeat_suffix(min, max, unbounded) + " \"\\\"\"";
    }

    std::string array(const json& schema, const std::string& path) {
        std::string item;
        if (!schema.contains("items")) {
            item = primitive_ref("value");
        } else if (schema["items"].is_array()) {
            fail(status::unsupported, "json schema: 'items' as an array (tuple) at ", path,
                 " is not supported");
        } else {
            item = expression(schema["items"], path + "-item");
        }
        const uint64_t min = count_of(schema, "minItems", 0);
        const bool unbounded = !schema.contains("maxItems");
        const uint64_t max = count_of(schema, "maxItems", 0);
        if (!unbounded && max < min)
            fail(status::invalid_argument, "json schema: maxItems ", max, " is below minItems ",
                 min, " at ", path);
        use("ws");
        std::string body = R"("[" ws )";
        if (unbounded || max > 0) {
            const std::string element = item + " ws";
            const uint64_t more_min = min == 0 ? 0 : min - 1;
            const std::string list = element + " (\",\" ws " + element + ")" +
                                     repeat_suffix(more_min, unbounded ? 0 : max - 1, unbounded);
            body += min == 0 ? "(" + list + ")? " : list + " ";
        }
        return add_rule(path, body + R"("]")");
    }

    std::string object(const json& schema, const std::string& path) {
        if (schema.contains("additionalProperties") &&
            schema["additionalProperties"] != json(false))
            fail(status::unsupported, "json schema: 'additionalProperties' other than false (at ",
                 path, ") is not supported");
        // No properties named and none forbidden: JSON Schema allows any members (OpenAI's
        // response_format json_object is this schema).
        if (!schema.contains("properties") && !schema.contains("additionalProperties") &&
            !schema.contains("required"))
            return primitive_ref("object");
        std::vector<std::pair<std::string, std::string>> members; // (member expression, key)
        if (schema.contains("properties")) {
            const json& properties = schema["properties"];
            if (!properties.is_object())
                fail(status::invalid_argument, "json schema: 'properties' at ", path,
                     " must be an object");
            for (const auto& [key, sub] : properties.items()) {
                use("ws");
                const std::string value = expression(sub, path + "-" + key);
                members.emplace_back(literal_of(json(key)) + " ws \":\" ws " + value + " ws", key);
            }
        }
        std::set<std::string> required;
        if (schema.contains("required")) {
            const json& r = schema["required"];
            if (!r.is_array())
                fail(status::invalid_argument, "json schema: 'required' at ", path,
                     " must be an array of property names");
            for (const json& key : r) {
                if (!key.is_string())
                    fail(status::invalid_argument, "json schema: 'required' at ", path,
                         " holds a non-string ", key.dump());
                const auto name = key.get<std::string>();
                if (std::none_of(members.begin(), members.end(),
                                 [&](const auto& m) { return m.second == name; }))
                    fail(status::invalid_argument, "json schema: required property '", name,
                         "' at ", path, " is not among its properties");
                required.insert(name);
            }
        }
        use("ws");
        // Members in schema order, optional ones skippable, commas only between those present:
        // first_i matches members i.. when none came before, rest_i when one did. Only the rules
        // that first_0 reaches are made.
        const size_t n = members.size();
        const auto is_required = [&](size_t i) { return required.count(members[i].second) != 0; };
        std::vector<bool> need_first(n + 1, false), need_rest(n + 1, false);
        need_first[0] = n > 0;
        for (size_t i = 0; i < n; ++i) {
            if (need_first[i] || need_rest[i]) need_rest[i + 1] = i + 1 < n;
            if (need_first[i] && !is_required(i)) need_first[i + 1] = i + 1 < n;
        }
        std::vector<std::string> first(n + 1), rest(n + 1);
        for (size_t i = n; i-- > 0;) {
            const std::string& member = members[i].first;
            const std::string rest_after = rest[i + 1].empty() ? "" : " " + rest[i + 1];
            std::string rest_body = "\",\" ws " + member + rest_after;
            std::string first_body = member + rest_after;
            if (!is_required(i)) {
                // Never a trailing '|': GBNF would continue the rule on the next line.
                rest_body =
                    rest[i + 1].empty() ? "(" + rest_body + ")?" : rest_body + " | " + rest[i + 1];
                first_body = first[i + 1].empty() ? "(" + first_body + ")?"
                                                  : first_body + " | " + first[i + 1];
            }
            if (need_rest[i]) rest[i] = add_rule(concat(path, "-rest-", i), std::move(rest_body));
            if (need_first[i])
                first[i] = add_rule(concat(path, "-members-", i), std::move(first_body));
        }
        return add_rule(path, R"("{" ws )" + (n == 0 ? std::string() : first[0] + " ") + R"("}")");
    }
};

} // namespace

std::string json_schema_to_gbnf(std::string_view schema_json) {
    json schema;
    try {
        schema = json::parse(schema_json, [](int depth, json::parse_event_t, json&) {
            if (depth > max_depth)
                fail(status::unsupported, "json schema: nested deeper than ", max_depth, " levels");
            return true;
        });
    } catch (const json::exception& e) {
        // parse_error, or out_of_range for a number past a double ("1e309").
        fail(status::invalid_argument, "json schema: not valid JSON: ", e.what());
    }
    std::string gbnf = schema_converter().convert(schema);
    // Repetitions can make the grammar larger than the parser takes (minItems of minItems): such
    // a schema is refused here rather than when a sampler is made of it. Any other refusal would
    // be the converter's own mistake.
    try {
        (void)parse_gbnf(gbnf);
    } catch (const error& e) {
        if (e.code() == status::unsupported) fail(status::unsupported, "json schema: ", e.what());
        fail(status::internal,
             "json schema: the grammar written for the schema does not parse: ", e.what());
    }
    return gbnf;
}

std::string_view json_value_gbnf() noexcept {
    static const std::string text = [] {
        std::string out = "root ::= ws value\n";
        for (const primitive& p : primitives())
            out += std::string(p.name) + " ::= " + p.body + "\n";
        return out;
    }();
    return text;
}

} // namespace pi
