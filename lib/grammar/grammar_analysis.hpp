#pragma once
// Whole-grammar checks the matcher relies on (docs/grammar.md).
#include <cstdint>
#include <optional>
#include <vector>

#include "grammar/grammar.hpp"

namespace pi {

// For each rule, whether it can match empty text.
std::vector<bool> nullable_rules(const grammar& g);

// A cycle of rules r0 -> r1 -> ... -> r0 where each can reach the next before matching any
// character (through a prefix that can match empty text), if there is one. The matcher's
// expansion of rule references would never end on such a cycle.
std::optional<std::vector<uint32_t>> find_left_recursion(const grammar& g);

} // namespace pi
