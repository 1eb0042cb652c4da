// Stack expansion and advancing; the grammar has no left recursion (grammar_analysis.hpp), which
// is what makes expand() finish.
#include "grammar/grammar_matcher.hpp"

#include <algorithm>

namespace pi {
namespace {

using kind = grammar_element::kind;

void add_unique(grammar_stacks& out, grammar_stack&& s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
}

// Replaces a rule reference on top by each of its alternatives until every stack's top is a
// character class (or the stack is empty), adding the results to `out`.
void expand(const grammar& g, grammar_stack stack, grammar_stacks& out) {
    if (stack.empty() || g.elements[stack.back()].type == kind::chars) {
        add_unique(out, std::move(stack));
        return;
    }
    const uint32_t at = stack.back();
    stack.pop_back();
    // What follows the reference in its own sequence comes after the referenced rule.
    if (g.elements[at + 1].type != kind::end) stack.push_back(at + 1);
    const grammar_rule& rule = g.rules[g.elements[at].index];
    for (const uint32_t start : rule.alternatives) {
        grammar_stack next = stack;
        if (g.elements[start].type != kind::end) next.push_back(start);
        expand(g, std::move(next), out);
    }
}

} // namespace

grammar_stacks initial_stacks(const grammar& g) {
    grammar_stacks out;
    for (const uint32_t start : g.rules[g.root].alternatives) {
        grammar_stack s;
        if (g.elements[start].type != kind::end) s.push_back(start);
        expand(g, std::move(s), out);
    }
    return out;
}

void stacks_after_top(const grammar& g, const grammar_stack& stack, grammar_stacks& out) {
    grammar_stack next(stack.begin(), stack.end() - 1);
    const uint32_t following = stack.back() + 1;
    if (g.elements[following].type != kind::end) next.push_back(following);
    expand(g, std::move(next), out);
}

grammar_stacks stacks_after(const grammar& g, const grammar_stacks& stacks, char32_t c) {
    grammar_stacks out;
    for (const grammar_stack& s : stacks)
        if (!s.empty() && g.classes[g.elements[s.back()].index].matches(c))
            stacks_after_top(g, s, out);
    return out;
}

bool stacks_may_end(const grammar_stacks& stacks) noexcept {
    return std::any_of(stacks.begin(), stacks.end(),
                       [](const grammar_stack& s) { return s.empty(); });
}

bool stacks_accept_partial(const grammar& g, const grammar_stacks& stacks, const utf8_partial& p) {
    char32_t first = 0, last = 0;
    if (!p.completions(first, last)) return false;
    return std::any_of(stacks.begin(), stacks.end(), [&](const grammar_stack& s) {
        return !s.empty() && g.classes[g.elements[s.back()].index].intersects(first, last);
    });
}

grammar_matcher::grammar_matcher(const grammar& g) : grammar_(&g), stacks_(initial_stacks(g)) {}

bool grammar_matcher::feed(std::string_view bytes) {
    const utf8_text text = decode_utf8(bytes, partial_);
    if (!text.valid) return false;
    grammar_stacks stacks = stacks_;
    for (const char32_t c : text.code_points) {
        stacks = stacks_after(*grammar_, stacks, c);
        if (stacks.empty()) return false;
    }
    if (text.tail.pending() && !stacks_accept_partial(*grammar_, stacks, text.tail)) return false;
    stacks_ = std::move(stacks);
    partial_ = text.tail;
    return true;
}

bool grammar_matcher::may_end() const noexcept {
    return !partial_.pending() && stacks_may_end(stacks_);
}

void grammar_matcher::reset() {
    stacks_ = initial_stacks(*grammar_);
    partial_ = {};
}

} // namespace pi
