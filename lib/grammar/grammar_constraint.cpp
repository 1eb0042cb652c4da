// Token filtering in the manner of llama.cpp's grammar sampler: the candidates are tested one
// code point at a time against each live stack, and the candidates that pass a stack's top move
// on together, so that the stack advance after a code point is computed once for all of them.
#include "grammar/grammar_constraint.hpp"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/utf8_decoder.hpp"
#include "support/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {
namespace {

// A token's output text as code points plus an unfinished code point at its end.
struct token_text {
    const char32_t* code_points = nullptr;
    uint32_t size = 0;
    utf8_partial tail;
};

class candidate_filter {
  public:
    candidate_filter(const grammar& g, const std::vector<token_text>& texts)
        : g_(g), texts_(texts) {}

    // The items (indices into texts) that no stack accepts, given that `depth` code points of
    // each have matched already.
    std::vector<uint32_t> rejected(const grammar_stacks& stacks, std::vector<uint32_t> items,
                                   uint32_t depth) const {
        for (const grammar_stack& s : stacks) {
            if (items.empty()) break;
            items = rejected_by(s, items, depth);
        }
        return items;
    }

  private:
    const grammar& g_;
    const std::vector<token_text>& texts_;

    std::vector<uint32_t> rejected_by(const grammar_stack& stack,
                                      const std::vector<uint32_t>& items, uint32_t depth) const {
        if (stack.empty()) return items; // the root is complete: nothing more may follow
        const grammar_char_class& top = g_.classes[g_.elements[stack.back()].index];
        std::vector<uint32_t> out;
        std::vector<uint32_t> further;
        for (const uint32_t i : items) {
            const token_text& t = texts_[i];
            if (depth == t.size) {
                char32_t first = 0, last = 0;
                if (!t.tail.completions(first, last) || !top.intersects(first, last))
                    out.push_back(i);
            } else if (!top.matches(t.code_points[depth])) {
                out.push_back(i);
            } else if (depth + 1 < t.size || t.tail.pending()) {
                further.push_back(i);
            }
        }
        if (!further.empty()) {
            grammar_stacks next;
            stacks_after_top(g_, stack, next);
            const std::vector<uint32_t> deeper = rejected(next, std::move(further), depth + 1);
            out.insert(out.end(), deeper.begin(), deeper.end());
        }
        return out;
    }
};

class grammar_constraint final : public token_constraint {
  public:
    grammar_constraint(grammar g, const tokenizer& vocab)
        : grammar_(std::make_unique<grammar>(std::move(g))), matcher_(*grammar_) {
        const int32_t n = vocab.n_tokens();
        pieces_.reserve(static_cast<size_t>(n));
        kinds_.assign(static_cast<size_t>(n), token_kind::forbidden);
        offsets_.reserve(static_cast<size_t>(n));
        tails_.resize(static_cast<size_t>(n));
        for (int32_t id = 0; id < n; ++id) {
            pieces_.push_back(vocab.piece(id));
            offsets_.push_back(static_cast<uint32_t>(code_points_.size()));
            if (pieces_.back().empty()) continue;
            // A piece that is not UTF-8 on its own (a continuation byte) may still finish a
            // code point an earlier token began.
            const utf8_text t = decode_utf8(pieces_.back());
            kinds_[id] = t.valid ? token_kind::text : token_kind::continuation;
            if (t.valid) {
                code_points_.insert(code_points_.end(), t.code_points.begin(), t.code_points.end());
                tails_[id] = t.tail;
            }
        }
        offsets_.push_back(static_cast<uint32_t>(code_points_.size()));
        for (const int32_t id : vocab.eog_tokens())
            kinds_[static_cast<size_t>(id)] = token_kind::end_of_generation;
    }

    void apply(candidate_list& candidates) const override {
        constexpr float forbidden = -std::numeric_limits<float>::infinity();
        for (const token_candidate& cand : candidates.tokens)
            (void)kind_of(cand.id); // a bad id throws before any logit changes
        const bool end_allowed = may_end();
        const bool pending = matcher_.partial().pending();
        const size_t n = candidates.tokens.size();
        std::vector<token_text> texts;
        std::vector<size_t> candidate_of; // texts index -> candidates index
        texts.reserve(n);
        candidate_of.reserve(n);
        // Decodings that continue the pending code point; reserved so that texts may point
        // into them.
        std::vector<utf8_text> continued;
        if (pending) continued.reserve(n);
        for (size_t c = 0; c < n; ++c) {
            token_candidate& cand = candidates.tokens[c];
            const token_kind k = kind_of(cand.id);
            if (k == token_kind::end_of_generation) {
                if (!end_allowed) cand.logit = forbidden;
                continue;
            }
            if (k == token_kind::forbidden || (k == token_kind::continuation && !pending)) {
                cand.logit = forbidden;
                continue;
            }
            if (pending) {
                const utf8_text& d =
                    continued.emplace_back(decode_utf8(pieces_[cand.id], matcher_.partial()));
                if (!d.valid) {
                    cand.logit = forbidden;
                    continued.pop_back();
                    continue;
                }
                texts.push_back(
                    {d.code_points.data(), static_cast<uint32_t>(d.code_points.size()), d.tail});
            } else {
                texts.push_back({code_points_.data() + offsets_[cand.id],
                                 offsets_[cand.id + 1] - offsets_[cand.id], tails_[cand.id]});
            }
            candidate_of.push_back(c);
        }
        std::vector<uint32_t> items(texts.size()); // indices into texts
        std::iota(items.begin(), items.end(), 0u);
        const candidate_filter filter(*grammar_, texts);
        for (const uint32_t i : filter.rejected(matcher_.stacks(), std::move(items), 0))
            candidates.tokens[candidate_of[i]].logit = forbidden;
    }

    void accept(int32_t token) override {
        const token_kind k = kind_of(token);
        if (k == token_kind::end_of_generation) {
            if (!may_end())
                fail(status::invalid_argument, "grammar: end-of-generation token ", token,
                     " before the grammar is complete");
            return;
        }
        if (k == token_kind::forbidden || !matcher_.feed(pieces_[token]))
            fail(status::invalid_argument, "grammar: token ", token, " ('", pieces_[token],
                 "') cannot continue the grammar here");
    }

    void reset() override { matcher_.reset(); }

    bool may_end() const override { return matcher_.may_end(); }

  private:
    // forbidden: empty piece; continuation: a piece valid only after an unfinished code point.
    enum class token_kind : uint8_t { forbidden, text, continuation, end_of_generation };

    token_kind kind_of(int32_t id) const {
        if (id < 0 || static_cast<size_t>(id) >= kinds_.size())
            fail(status::invalid_argument, "grammar: token id ", id,
                 " is outside the vocabulary of ", kinds_.size(), " tokens");
        return kinds_[static_cast<size_t>(id)];
    }

    std::unique_ptr<const grammar> grammar_;
    grammar_matcher matcher_;
    std::vector<std::string> pieces_;
    std::vector<token_kind> kinds_;
    // Code points of all pieces decoded from a clean start, token id's at offsets_[id]..[id+1].
    std::vector<char32_t> code_points_;
    std::vector<uint32_t> offsets_;
    std::vector<utf8_partial> tails_;
};

} // namespace

std::unique_ptr<token_constraint>
make_grammar_constraint(std::string_view gbnf, std::string_view root, const tokenizer& vocab) {
    return std::make_unique<grammar_constraint>(parse_gbnf(gbnf, root.empty() ? "root" : root),
                                                vocab);
}

} // namespace pi
