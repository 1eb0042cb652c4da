// Nullable rules by fixpoint, then a depth-first search for a cycle among "left" references.
#include "grammar/grammar_analysis.hpp"

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
    std::vector<bool> nullable(g.rules.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < g.rules.size(); ++r) {
            if (nullable[r]) continue;
            for (const uint32_t start : g.rules[r].alternatives) {
                uint32_t i = start;
                while (g.elements[i].type == kind::rule && nullable[g.elements[i].index])
                    ++i;
                if (g.elements[i].type == kind::end) {
                    nullable[r] = true;
                    changed = true;
                    break;
                }
            }
        }
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
