// The BPE pre-tokenizer. The GPT-2 rules are its regular expression
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written as a scanner, so a long word costs linear time. Falcon's (Hugging Face's Falcon
// tokenizer, as current llama.cpp runs it) first cuts out runs of punctuation, applies the GPT-2
// rules to each piece, then cuts every group of three ASCII digits out of each word.
#include "tokenizer/pre_tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/unicode_classes.hpp"

namespace pi {
namespace {

using unicode::cp_class;

struct character {
    uint32_t cp;
    cp_class cls;
    size_t offset; // of its first byte in the text
};

std::vector<character> characters_of(std::string_view text) {
    std::vector<character> chars;
    chars.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
        const unicode::decoded d = unicode::decode_utf8(text, at);
        // An invalid byte must not pass for the code point of the same value (0x85 is not NEL).
        const cp_class cls = d.valid ? unicode::class_of(d.cp) : cp_class::other;
        chars.push_back({d.valid ? d.cp : 0xFFFFFFFFu, cls, at});
        at += d.n_bytes;
    }
    return chars;
}

// Hugging Face's Punctuation pre-tokenizer: Unicode P* plus the ASCII symbols Rust's
// is_ascii_punctuation also counts.
bool is_falcon_punctuation(const character& c) noexcept {
    if (c.cls == cp_class::punctuation) return true;
    switch (c.cp) {
    case '$':
    case '+':
    case '<':
    case '=':
    case '>':
    case '^':
    case '~':
    case '|':
    case '`':
        return true;
    default:
        return false;
    }
}

bool is_ascii_digit(const character& c) noexcept {
    return c.cp >= '0' && c.cp <= '9';
}

class splitter {
  public:
    splitter(bpe_pre rules, std::string_view text, std::vector<std::string_view>& words)
        : rules_(rules), text_(text), chars_(characters_of(text)), words_(words) {}

    void run() {
        if (rules_ == bpe_pre::gpt2) {
            gpt2_rules(0, chars_.size());
            return;
        }
        // Each maximal run of punctuation is a piece, and so is each run between them.
        for (size_t begin = 0; begin < chars_.size();) {
            const bool punct = is_falcon_punctuation(chars_[begin]);
            size_t end = begin + 1;
            while (end < chars_.size() && is_falcon_punctuation(chars_[end]) == punct)
                ++end;
            gpt2_rules(begin, end);
            begin = end;
        }
    }

  private:
    // The GPT-2 expression on characters [begin, end): a class outside the piece matches no
    // alternative, as the end of the subject does for a regex.
    void gpt2_rules(size_t begin, size_t end) {
        const auto cp_at = [&](size_t i) { return i < end ? chars_[i].cp : 0xFFFFFFFFu; };
        const auto in = [&](size_t i, cp_class c) { return i < end && chars_[i].cls == c; };
        const auto other_at = [&](size_t i) {
            return i < end &&
                   (chars_[i].cls == cp_class::other || chars_[i].cls == cp_class::punctuation);
        };
        size_t pos = begin;
        while (pos < end) {
            const size_t start = pos;
            const uint32_t cp = chars_[pos].cp;
            if (cp == '\'') {
                const uint32_t c1 = cp_at(pos + 1);
                const uint32_t c2 = cp_at(pos + 2);
                if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                    word(start, pos + 2);
                    pos += 2;
                    continue;
                }
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
                    (c1 == 'l' && c2 == 'l')) {
                    word(start, pos + 3);
                    pos += 3;
                    continue;
                }
            }
            // " ?X+": the optional space belongs to the run that follows it.
            const size_t run = cp == ' ' ? pos + 1 : pos;
            if (in(run, cp_class::letter) || in(run, cp_class::number)) {
                const cp_class c = chars_[run].cls;
                pos = run;
                while (in(pos, c))
                    ++pos;
                word(start, pos);
                continue;
            }
            if (other_at(run)) {
                pos = run;
                while (other_at(pos))
                    ++pos;
                word(start, pos);
                continue;
            }
            // Whitespace (every other case starts with some): "\s+(?!\S)" leaves the last one
            // of a run to the word after it; at the end of the piece "\s+" takes it all.
            size_t n = 0;
            while (in(pos + n, cp_class::space))
                ++n;
            pos += n > 1 && pos + n < end ? n - 1 : n;
            word(start, pos);
        }
    }

    // A word of the GPT-2 rules; Falcon cuts its three-digit groups out of it.
    void word(size_t begin, size_t end) {
        if (rules_ == bpe_pre::falcon) {
            for (size_t i = begin; i + 3 <= end;) {
                if (is_ascii_digit(chars_[i]) && is_ascii_digit(chars_[i + 1]) &&
                    is_ascii_digit(chars_[i + 2])) {
                    emit(begin, i);
                    emit(i, i + 3);
                    begin = i += 3;
                } else {
                    ++i;
                }
            }
        }
        emit(begin, end);
    }

    void emit(size_t begin, size_t end) {
        if (begin == end) return;
        const size_t from = chars_[begin].offset;
        const size_t to = end < chars_.size() ? chars_[end].offset : text_.size();
        words_.push_back(text_.substr(from, to - from));
    }

    bpe_pre rules_;
    std::string_view text_;
    std::vector<character> chars_;
    std::vector<std::string_view>& words_;
};

} // namespace

void pre_tokenize(bpe_pre rules, std::string_view text, std::vector<std::string_view>& words) {
    splitter(rules, text, words).run();
}

} // namespace pi
