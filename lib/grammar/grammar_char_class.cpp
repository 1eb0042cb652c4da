// Whether a character class meets a range of code points; its ranges are sorted and disjoint
// (gbnf_parser.cpp).
#include "grammar/grammar.hpp"

namespace pi {

bool grammar_char_class::intersects(char32_t first, char32_t last) const noexcept {
    if (!negated) {
        for (const code_point_range& r : ranges)
            if (r.first <= last && first <= r.last) return true;
        return false;
    }
    // The complement meets first..last unless one range covers all of it (ranges are merged).
    for (const code_point_range& r : ranges)
        if (r.first <= first && last <= r.last) return false;
    return true;
}

} // namespace pi
