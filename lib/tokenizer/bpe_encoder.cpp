// Byte-level BPE (llama.cpp llm_tokenizer_bpe): the pre-tokenizer's words, each merged on its own
// by lowest merge rank. Symbols are a linked list over the word's bytes; candidate pairs sit in a
// heap ordered lowest rank first, so a word of n bytes costs O(n log n) however long it is.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "support/error.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace pi {
namespace {

// Symbol i starts at byte i of the word (a merge keeps the left side's start) and ends where
// the next live symbol starts.
struct symbol {
    int32_t id; // bpe_tables symbol; -1 when the byte has none or it was merged away
    int64_t prev;
    int64_t next;
};

// 24 bytes: the heap's sifting is most of the time of a long word.
struct candidate {
    int32_t rank;
    int32_t left_id; // the sides' symbols when queued: a change since means it is stale
    int32_t right_id;
    int32_t result;
    int64_t left; // the right side is left's next: that link changes only when left's id does

    // Heap order ("less" is the lower priority): the higher rank, then (between equal ranks) the
    // pair further right.
    bool operator<(const candidate& o) const noexcept {
        return rank > o.rank || (rank == o.rank && left > o.left);
    }
};

class merger {
  public:
    explicit merger(const vocab_tables& t) : t_(t), b_(t.bpe) {}

    void encode(std::string_view word, std::vector<int32_t>& out) {
        symbols_.clear();
        heap_.clear();
        const auto n = static_cast<int64_t>(word.size());
        for (int64_t i = 0; i < n; ++i)
            symbols_.push_back(
                {b_.byte_symbol[static_cast<uint8_t>(word[i])], i - 1, i + 1 == n ? -1 : i + 1});
        for (int64_t i = 1; i < n; ++i)
            add(i - 1, i);
        std::make_heap(heap_.begin(), heap_.end()); // linear, where n pushes are n log n
        while (!heap_.empty()) {
            std::pop_heap(heap_.begin(), heap_.end());
            const candidate c = heap_.back();
            heap_.pop_back();
            symbol& left = symbols_[c.left];
            if (left.id != c.left_id || left.next < 0) continue;
            symbol& right = symbols_[left.next];
            if (right.id != c.right_id) continue;
            left.id = c.result;
            right.id = -1;
            left.next = right.next;
            if (left.next >= 0) symbols_[left.next].prev = c.left;
            push(left.prev, c.left);
            push(c.left, left.next);
        }
        for (int64_t i = 0; i != -1; i = symbols_[i].next)
            emit(word.substr(i, (symbols_[i].next < 0 ? n : symbols_[i].next) - i), symbols_[i].id,
                 out);
    }

  private:
    // Queues the pair (left, right) when a merge names it; false when none does.
    bool add(int64_t left, int64_t right) {
        if (left < 0 || right < 0) return false;
        const int32_t l = symbols_[left].id;
        const int32_t r = symbols_[right].id;
        if (l < 0 || r < 0) return false;
        const auto it = b_.merges.find(bpe_tables::key(l, r));
        if (it == b_.merges.end()) return false;
        heap_.push_back({it->second.rank, l, r, it->second.result, left});
        return true;
    }

    void push(int64_t left, int64_t right) {
        if (add(left, right)) std::push_heap(heap_.begin(), heap_.end());
    }

    // A final symbol that is no token (a text only merges name, or a byte without a symbol) is
    // spelled by its bytes' one-character tokens.
    void emit(std::string_view piece, int32_t symbol_id, std::vector<int32_t>& out) const {
        if (symbol_id >= 0 && symbol_id < b_.n_vocab) {
            out.push_back(symbol_id);
            return;
        }
        for (const char ch : piece) {
            const auto byte = static_cast<uint8_t>(ch);
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
    std::vector<candidate> heap_;
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
