// Stack expansion and advancing; the grammar has no left recursion (grammar_analysis.hpp), which
// is what makes an expansion finish. It runs on an explicit work list, since a chain of rules
// may be longer than the thread's stack is deep, and it is bounded (docs/grammar.md, "Limits").
#include "grammar/grammar_matcher.hpp"

#include <algorithm>
#include <unordered_set>

#include "support/error.hpp"

namespace pi {
namespace {

using kind = grammar_element::kind;

// An ambiguous grammar can double its live stacks with every code point (x ::= "a" x "b" |
// "a" x "c" | ""), and nested optional items make stacks as long as the grammar is: without
// bounds, a hostile grammar would hold the host for as long as it likes.
constexpr size_t max_stacks = 4096;
constexpr size_t max_expanded_elements = size_t{1} << 22;

struct stack_hash {
    size_t operator()(const grammar_stack& s) const noexcept {
        uint64_t h = 0xcbf29ce484222325ull;
        for (const uint32_t e : s)
            h = (h ^ e) * 0x100000001b3ull;
        return static_cast<size_t>(h);
    }
};

// One expansion step of the matcher (the stacks of one code point, or of the start): adds to
// `out` the stacks it reaches, each once.
class expander {
  public:
    expander(const grammar& g, grammar_stacks& out) : g_(g), out_(out) {
        for (const grammar_stack& s : out_)
            seen_.insert(s);
    }

    // Replaces a rule reference on top by each of its alternatives until every stack's top is a
    // character class (or the stack is empty). A stack met twice is expanded once: nested
    // optional items reach the same stack along many paths, exponentially many in their depth.
    void expand(grammar_stack start) {
        std::vector<grammar_stack> work;
        work.push_back(std::move(start));
        while (!work.empty()) {
            grammar_stack stack = std::move(work.back());
            work.pop_back();
            charge(stack.size());
            if (!seen_.insert(stack).second) continue;
            if (stack.empty() || g_.elements[stack.back()].type == kind::chars) {
                if (out_.size() == max_stacks)
                    fail(status::unsupported, "grammar: more than ", max_stacks,
                         " parse stacks are alive at once; the grammar is too ambiguous to match");
                out_.push_back(std::move(stack));
                continue;
            }
            const uint32_t at = stack.back();
            stack.pop_back();
            // What follows the reference in its own sequence comes after the referenced rule.
            if (g_.elements[at + 1].type != kind::end) stack.push_back(at + 1);
            // The last alternative goes on the work list first, so the first is expanded first
            // and the stacks come out in the order of the grammar.
            const std::vector<uint32_t>& alternatives =
                g_.rules[g_.elements[at].index].alternatives;
            for (auto it = alternatives.rbegin(); it != alternatives.rend(); ++it) {
                grammar_stack next = stack;
                if (g_.elements[*it].type != kind::end) next.push_back(*it);
                work.push_back(std::move(next));
            }
        }
    }

    // The stacks after the top of `stack` (a character class) has matched.
    void after_top(const grammar_stack& stack) {
        grammar_stack next(stack.begin(), stack.end() - 1);
        const uint32_t following = stack.back() + 1;
        if (g_.elements[following].type != kind::end) next.push_back(following);
        expand(std::move(next));
    }

  private:
    const grammar& g_;
    grammar_stacks& out_;
    std::unordered_set<grammar_stack, stack_hash> seen_;
    size_t expanded_ = 0; // stack elements copied so far

    void charge(size_t elements) {
        expanded_ += elements + 1;
        if (expanded_ > max_expanded_elements)
            fail(status::unsupported, "grammar: one matching step expands more than ",
                 max_expanded_elements,
                 " stack elements; the grammar is too ambiguous or too deeply nested to match");
    }
};

} // namespace

grammar_stacks initial_stacks(const grammar& g) {
    grammar_stacks out;
    expander e(g, out);
    for (const uint32_t start : g.rules[g.root].alternatives) {
        grammar_stack s;
        if (g.elements[start].type != kind::end) s.push_back(start);
        e.expand(std::move(s));
    }
    return out;
}

void stacks_after_top(const grammar& g, const grammar_stack& stack, grammar_stacks& out) {
    expander(g, out).after_top(stack);
}

grammar_stacks stacks_after(const grammar& g, const grammar_stacks& stacks, char32_t c) {
    grammar_stacks out;
    expander e(g, out);
    for (const grammar_stack& s : stacks)
        if (!s.empty() && g.classes[g.elements[s.back()].index].matches(c)) e.after_top(s);
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
