// Byte-level BPE (llama.cpp llm_tokenizer_bpe): the pre-tokenizer's words, each merged on its own
// by lowest merge rank. Symbols are a linked list over the word's bytes; candidate pairs sit in a
// min-heap, so a word of n bytes costs O(n log n) however long it is.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <queue>
#include <string_view>
#include <vector>

#include "support/error.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace pi {
namespace {

struct symbol {
    int32_t id;   // bpe_tables symbol; -1 when the bytes have none or it was merged away
    size_t start; // byte range in the word
    size_t n;
    int64_t prev;
    int64_t next;
};

struct candidate {
    int32_t rank;
    int64_t left;
    int64_t right;
    int32_t left_id; // the sides' symbols when queued: a change since means it is stale
    int32_t right_id;
    int32_t result;

    // std::priority_queue is a max-heap: "less" is the lower priority, i.e. the higher rank,
    // then (between equal ranks) the pair further right.
    bool operator<(const candidate& o) const noexcept {
        return rank > o.rank || (rank == o.rank && left > o.left);
    }
};

class merger {
  public:
    explicit merger(const vocab_tables& t) : t_(t), b_(t.bpe) {}

    void encode(std::string_view word, std::vector<int32_t>& out) {
        symbols_.clear();
        for (size_t i = 0; i < word.size(); ++i) {
            const auto index = static_cast<int64_t>(i);
            symbols_.push_back({b_.byte_symbol[static_cast<uint8_t>(word[i])], i, 1, index - 1,
                                i + 1 == word.size() ? -1 : index + 1});
        }
        for (size_t i = 1; i < symbols_.size(); ++i)
            try_add(static_cast<int64_t>(i) - 1, static_cast<int64_t>(i));
        while (!queue_.empty()) {
            const candidate c = queue_.top();
            queue_.pop();
            symbol& left = symbols_[c.left];
            symbol& right = symbols_[c.right];
            if (left.id != c.left_id || right.id != c.right_id) continue;
            left.id = c.result;
            left.n += right.n;
            left.next = right.next;
            if (right.next >= 0) symbols_[right.next].prev = c.left;
            right.id = -1;
            try_add(left.prev, c.left);
            try_add(c.left, left.next);
        }
        for (int64_t i = 0; i != -1; i = symbols_[i].next)
            emit(word, symbols_[i], out);
    }

  private:
    void try_add(int64_t left, int64_t right) {
        if (left < 0 || right < 0) return;
        const int32_t l = symbols_[left].id;
        const int32_t r = symbols_[right].id;
        if (l < 0 || r < 0) return;
        const auto it = b_.merges.find(bpe_tables::key(l, r));
        if (it == b_.merges.end()) return;
        queue_.push({it->second.rank, left, right, l, r, it->second.result});
    }

    // A final symbol that is no token (a text only merges name, or a byte without a symbol) is
    // spelled by its bytes' one-character tokens.
    void emit(std::string_view word, const symbol& s, std::vector<int32_t>& out) const {
        if (s.id >= 0 && s.id < b_.n_vocab) {
            out.push_back(s.id);
            return;
        }
        for (size_t i = s.start; i < s.start + s.n; ++i) {
            const auto byte = static_cast<uint8_t>(word[i]);
            const int32_t id = b_.byte_symbol[byte];
            if (id < 0 || id >= b_.n_vocab) {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02X", byte);
                fail(status::invalid_argument, "byte ", hex,
                     " of the text has no token in this BPE vocabulary (", t_.v.text.size(),
                     " tokens): its byte-level character is not a token");
            }
            out.push_back(id);
        }
    }

    const vocab_tables& t_;
    const bpe_tables& b_;
    std::vector<symbol> symbols_;
    std::priority_queue<candidate> queue_;
};

} // namespace

void bpe_encode(const vocab_tables& t, std::string_view text, std::vector<int32_t>& out) {
    std::vector<std::string_view> words;
    pre_tokenize(t.v.pre, text, words);
    merger m(t);
    for (const std::string_view word : words)
        m.encode(word, out);
}

} // namespace pi
