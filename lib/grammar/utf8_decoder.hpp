#pragma once
// UTF-8 decoding that may stop inside a code point: a token's bytes can end mid-character
// (byte tokens), and the next token completes it.
#include <cstdint>
#include <string_view>
#include <vector>

namespace pi {

// The bytes of an unfinished code point: its bits so far and how many continuation bytes are
// still due.
struct utf8_partial {
    char32_t bits = 0;
    uint8_t remaining = 0;
    uint8_t length = 0; // bytes of the whole sequence

    bool pending() const noexcept { return remaining != 0; }
    // The code points the sequence can still become: first..last. False when none is valid
    // (an overlong form, a surrogate or past U+10FFFF whatever follows).
    bool completions(char32_t& first, char32_t& last) const noexcept;
};

struct utf8_text {
    std::vector<char32_t> code_points;
    utf8_partial tail; // where the bytes stopped
    bool valid = true; // false on a byte no well-formed UTF-8 continues with
};

// Decodes `bytes`, continuing the unfinished code point `start`.
utf8_text decode_utf8(std::string_view bytes, utf8_partial start = {});

// Appends the UTF-8 encoding of `c` to `out`.
void append_utf8(std::string& out, char32_t c);

} // namespace pi
