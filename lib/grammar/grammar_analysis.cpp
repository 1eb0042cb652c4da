// Nullable rules by a worklist, then a depth-first search for a cycle among "left" references.
#include "grammar/grammar_analysis.hpp"

#include <utility>

namespace pi {
namespace {

using kind = grammar_element::kind;

// The rules each rule can reach before matching a character.
std::vector<std::vector<uint32_t>> left_references(const grammar& g,
                                                   const std::vector<bool>& nullable) {
    std::vector<std::vector<uint32_t>> refs(g.rules.size());
    for (size_t r = 0; r < g.rules.size(); ++r) {
        for (const uint32_t start : g.rules[r].alternatives) {
            for (uint32_t i = start; g.elements[i].type == kind::rule; ++i) {
                refs[r].push_back(g.elements[i].index);
                if (!nullable[g.elements[i].index]) break;
            }
        }
    }
    return refs;
}

} // namespace

std::vector<bool> nullable_rules(const grammar& g) {
    // A worklist rather than passes to a fixpoint: a chain of rules each nullable through the
    // next, written in the wrong order, would take one pass per rule (quadratic in the size of a
    // hostile grammar). Each alternative's scan stops at a reference to a rule not known to be
    // nullable and resumes when that rule becomes so, so every element is passed once.
    std::vector<bool> nullable(g.rules.size(), false);
    struct scan {
        uint32_t rule;
        uint32_t at; // the first element not known to match empty text
    };
    std::vector<scan> scans;
    for (uint32_t r = 0; r < g.rules.size(); ++r)
        for (const uint32_t start : g.rules[r].alternatives)
            scans.push_back({r, start});
    std::vector<std::vector<uint32_t>> waiting(g.rules.size()); // scans stopped at each rule
    std::vector<uint32_t> newly_nullable;
    const auto advance = [&](uint32_t s) {
        uint32_t& i = scans[s].at;
        while (g.elements[i].type == kind::rule && nullable[g.elements[i].index])
            ++i;
        if (g.elements[i].type == kind::rule) {
            waiting[g.elements[i].index].push_back(s);
        } else if (g.elements[i].type == kind::end && !nullable[scans[s].rule]) {
            nullable[scans[s].rule] = true;
            newly_nullable.push_back(scans[s].rule);
        }
    };
    for (uint32_t s = 0; s < scans.size(); ++s)
        advance(s);
    while (!newly_nullable.empty()) {
        const uint32_t r = newly_nullable.back();
        newly_nullable.pop_back();
        for (const uint32_t s : std::exchange(waiting[r], {}))
            advance(s);
    }
    return nullable;
}

std::optional<std::vector<uint32_t>> find_left_recursion(const grammar& g) {
    const auto refs = left_references(g, nullable_rules(g));
    enum class mark : uint8_t { unseen, on_path, done };
    std::vector<mark> marks(g.rules.size(), mark::unseen);
    // An explicit stack: generated repetition chains can be thousands of rules deep.
    struct frame {
        uint32_t rule;
        size_t next = 0;
    };
    for (uint32_t start = 0; start < g.rules.size(); ++start) {
        if (marks[start] != mark::unseen) continue;
        std::vector<frame> path{{start}};
        marks[start] = mark::on_path;
        while (!path.empty()) {
            frame& f = path.back();
            if (f.next == refs[f.rule].size()) {
                marks[f.rule] = mark::done;
                path.pop_back();
                continue;
            }
            const uint32_t to = refs[f.rule][f.next++];
            if (marks[to] == mark::on_path) {
                std::vector<uint32_t> cycle;
                size_t i = path.size();
                while (path[i - 1].rule != to)
                    --i;
                for (; i <= path.size(); ++i)
                    cycle.push_back(path[i - 1].rule);
                return cycle;
            }
            if (marks[to] == mark::unseen) {
                marks[to] = mark::on_path;
                path.push_back({to});
            }
        }
    }
    return std::nullopt;
}

} // namespace pi
