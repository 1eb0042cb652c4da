#pragma once
// JSON schema -> GBNF, for the subset docs/grammar.md lists.
#include <string>
#include <string_view>

namespace pi {

// A GBNF grammar (start rule "root") whose matches are exactly the JSON texts the schema allows,
// with bounded whitespace and number lengths. Throws pi::error(invalid_argument) for malformed
// JSON or an inconsistent schema, pi::error(unsupported) naming a keyword outside the subset.
std::string json_schema_to_gbnf(std::string_view schema_json);

// The grammar of any JSON value (start rule "root"): what the schema {} gives.
std::string_view json_value_gbnf() noexcept;

} // namespace pi
