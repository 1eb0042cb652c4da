// JSON schemas (docs/grammar.md, "JSON schema") from arbitrary text: json_schema_to_gbnf on the
// whole input. A schema may be refused, but only with pi::error(invalid_argument) (malformed
// JSON or an inconsistent schema) or pi::error(unsupported) (a keyword outside the subset); a
// grammar it returns must parse with parse_gbnf, and a matcher must start on it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_outcome.hpp"
#include "grammar/grammar.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/json_schema.hpp"
#include "support/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view schema(reinterpret_cast<const char*>(data), size);
    std::string gbnf;
    try {
        gbnf = pi::json_schema_to_gbnf(schema);
    } catch (const pi::error& e) {
        if (e.code() != pi::status::invalid_argument && e.code() != pi::status::unsupported)
            __builtin_trap();
        return 0;
    }
    try {
        const pi::grammar g = pi::parse_gbnf(gbnf);
        const pi::grammar_matcher matcher(g);
        (void)matcher.may_end();
    } catch (const pi::error&) {
        __builtin_trap(); // the converter wrote a grammar its own parser refuses
    }
    pi::fuzz::note_accepted();
    return 0;
}
