// SentencePiece-style greedy merging (llama.cpp llm_tokenizer_spm): symbols are a linked list
// over one normalised string, candidate merges sit in a max-heap keyed by token score, so a text
// of n characters costs O(n log n).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_impl.hpp"

namespace pi {
namespace {

constexpr std::string_view space_marker = "\xE2\x96\x81"; // U+2581

struct symbol {
    size_t start = 0;
    size_t n = 0; // 0 once merged into its left neighbour
    int64_t prev = -1;
    int64_t next = -1;
};

struct bigram {
    float score = 0;
    int64_t left = 0;
    int64_t right = 0;
    size_t size = 0; // byte size when pushed; a mismatch later means a side has changed

    // Max-heap order: higher score first, ties to the smaller left index.
    bool operator<(const bigram& o) const noexcept {
        return score < o.score || (score == o.score && left > o.left);
    }
};

size_t utf8_length(uint8_t lead) noexcept {
    static constexpr uint8_t by_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return by_nibble[lead >> 4];
}

std::string normalise(std::string_view text) {
    std::string s;
    s.reserve((text.size() + 1) * space_marker.size());
    s += space_marker;
    for (const char c : text) {
        if (c == ' ')
            s += space_marker;
        else
            s += c;
    }
    return s;
}

class merger {
  public:
    merger(const vocab_tables& t, std::string text) : t_(t), text_(std::move(text)) {
        for (size_t offs = 0; offs < text_.size();) {
            const size_t n =
                std::min(utf8_length(static_cast<uint8_t>(text_[offs])), text_.size() - offs);
            const auto index = static_cast<int64_t>(symbols_.size());
            symbols_.push_back({offs, n, index - 1, offs + n == text_.size() ? -1 : index + 1});
            offs += n;
        }
    }

    void run() {
        for (size_t i = 1; i < symbols_.size(); ++i)
            try_add(static_cast<int64_t>(i) - 1, static_cast<int64_t>(i));
        while (!queue_.empty()) {
            const bigram b = queue_.top();
            queue_.pop();
            symbol& left = symbols_[b.left];
            symbol& right = symbols_[b.right];
            if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
            left.n += right.n;
            right.n = 0;
            left.next = right.next;
            if (right.next >= 0) symbols_[right.next].prev = b.left;
            try_add(left.prev, b.left);
            try_add(b.left, left.next);
        }
    }

    // Merges only ever create vocabulary texts, so a final symbol that is not a token is one
    // unmerged character: it falls back to byte tokens.
    void emit(std::vector<int32_t>& out) const {
        for (int64_t i = 0; i != -1; i = symbols_[i].next) {
            const symbol& s = symbols_[i];
            const std::string_view piece(text_.data() + s.start, s.n);
            if (const int32_t id = t_.find(piece); id >= 0) {
                out.push_back(id);
                continue;
            }
            for (const char c : piece) {
                const int32_t id = t_.byte_token[static_cast<uint8_t>(c)];
                // A vocabulary with neither byte tokens nor an unknown token cannot spell it.
                if (id >= 0) out.push_back(id);
            }
        }
    }

  private:
    void try_add(int64_t left, int64_t right) {
        if (left < 0 || right < 0) return;
        const size_t size = symbols_[left].n + symbols_[right].n;
        if (size > t_.max_token_bytes) return;
        const int32_t id = t_.find(std::string_view(text_.data() + symbols_[left].start, size));
        if (id < 0) return;
        queue_.push({t_.v.score[id], left, right, size});
    }

    const vocab_tables& t_;
    std::string text_;
    std::vector<symbol> symbols_;
    std::priority_queue<bigram> queue_;
};

} // namespace

void spm_encode(const vocab_tables& t, std::string_view text, std::vector<int32_t>& out) {
    merger m(t, normalise(text));
    m.run();
    m.emit(out);
}

} // namespace pi
