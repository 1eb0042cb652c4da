// GBNF grammars (docs/grammar.md) from arbitrary text: parse_gbnf, then, when the text parses,
// the matcher and the token constraint over it. The input is the grammar up to the first NUL
// byte; after it come NUL-separated probe texts (at most 4, each cut to 256 bytes). Byte k of the
// first probe also chooses which allowed token the constraint accepts at its step k (4 steps).
// Beyond "no crash and no hang", the matcher must agree with itself and with the constraint:
//   - feeding a probe whole or byte by byte gives the same verdict and the same may_end();
//   - a token the constraint leaves allowed is exactly one whose piece the matcher can take
//     (end-of-generation tokens: exactly when the text may end), and accepting it works.
// A grammar may be refused, and matching may stop, only with a pi::error.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_models.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_scratch.hpp"
#include "gguf/gguf.hpp"
#include "grammar/grammar.hpp"
#include "grammar/grammar_constraint.hpp"
#include "grammar/grammar_matcher.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

constexpr size_t max_probes = 4;
constexpr size_t max_probe_bytes = 256;
constexpr int constraint_steps = 4;

// The tiny cut of the fixture's SPM vocabulary: byte tokens, merges, <s> and </s>.
const pi::tokenizer& vocab() {
    static const std::unique_ptr<pi::tokenizer> t = [] {
        const std::string path = pi::fuzz::scratch_dir() + "/vocab-tiny.gguf";
        pi::fuzz::write_tiny_vocab(path);
        return pi::tokenizer::from_gguf(*pi::gguf::file::open(path));
    }();
    return *t;
}

void check_probe(const pi::grammar& g, std::string_view probe) {
    pi::grammar_matcher whole(g);
    const bool whole_ok = whole.feed(probe);
    pi::grammar_matcher bytes(g);
    bool bytes_ok = true;
    for (size_t i = 0; i < probe.size() && bytes_ok; ++i)
        bytes_ok = bytes.feed(probe.substr(i, 1));
    if (whole_ok != bytes_ok || (whole_ok && whole.may_end() != bytes.may_end())) __builtin_trap();
}

// Runs the constraint for a few steps next to a matcher fed the same pieces.
void check_constraint(const pi::grammar& g, std::string_view text, std::string_view choices) {
    const pi::tokenizer& t = vocab();
    const auto constraint = pi::make_grammar_constraint(text, "root", t);
    pi::grammar_matcher matcher(g);
    for (int step = 0; step < constraint_steps; ++step) {
        pi::candidate_list candidates;
        for (int32_t id = 0; id < t.n_tokens(); ++id)
            candidates.tokens.push_back({id, 0.0f, 0.0f});
        constraint->apply(candidates);
        if (constraint->may_end() != matcher.may_end()) __builtin_trap();
        std::vector<int32_t> allowed;
        for (const pi::token_candidate& c : candidates.tokens) {
            const bool kept = !std::isinf(c.logit);
            if (t.is_eog(c.id)) {
                if (kept != matcher.may_end()) __builtin_trap();
                continue;
            }
            const std::string piece = t.piece(c.id);
            pi::grammar_matcher probe = matcher;
            if (kept != (!piece.empty() && probe.feed(piece))) __builtin_trap();
            if (kept) allowed.push_back(c.id);
        }
        if (allowed.empty()) return;
        const size_t pick =
            static_cast<size_t>(step) < choices.size() ? static_cast<uint8_t>(choices[step]) : 0;
        const int32_t token = allowed[pick % allowed.size()];
        try {
            constraint->accept(token);
        } catch (const pi::error&) {
            __builtin_trap(); // apply allowed it
        }
        if (!matcher.feed(t.piece(token))) __builtin_trap();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t end = input.find('\0');
    const std::string_view text = input.substr(0, end);
    std::vector<std::string_view> probes;
    std::string_view rest = end == std::string_view::npos ? "" : input.substr(end + 1);
    while (!rest.empty() && probes.size() < max_probes) {
        const size_t next = rest.find('\0');
        probes.push_back(rest.substr(0, std::min(next, max_probe_bytes)));
        rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
    }
    try {
        const pi::grammar g = pi::parse_gbnf(text);
        pi::fuzz::note_accepted();
        for (const std::string_view probe : probes)
            check_probe(g, probe);
        check_constraint(g, text, probes.empty() ? std::string_view() : probes[0]);
    } catch (const pi::error&) {
    }
    return 0;
}
