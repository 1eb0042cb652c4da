// Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), docs/grammar.md.
#include <string>

#include "grammar/utf8_decoder.hpp"

namespace pi {
namespace {

constexpr char32_t max_code_point = 0x10FFFF;

char32_t smallest_of_length(uint8_t length) noexcept {
    return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
}

bool is_surrogate(char32_t c) noexcept {
    return c >= 0xD800 && c <= 0xDFFF;
}

} // namespace

bool utf8_partial::completions(char32_t& first, char32_t& last) const noexcept {
    const unsigned shift = 6u * remaining;
    first = bits << shift;
    last = ((bits + 1) << shift) - 1;
    if (first < smallest_of_length(length)) first = smallest_of_length(length);
    if (last > max_code_point) last = max_code_point;
    if (first > last) return false;
    return !(is_surrogate(first) && is_surrogate(last));
}

utf8_text decode_utf8(std::string_view bytes, utf8_partial start) {
    utf8_text out;
    utf8_partial p = start;
    for (const char ch : bytes) {
        const auto b = static_cast<uint8_t>(ch);
        if (p.pending()) {
            if ((b & 0xC0) != 0x80) {
                out.valid = false;
                return out;
            }
            p.bits = (p.bits << 6) | (b & 0x3F);
            --p.remaining;
        } else if (b < 0x80) {
            out.code_points.push_back(b);
            continue;
        } else if (b >= 0xC2 && b <= 0xDF) {
            p = {static_cast<char32_t>(b & 0x1F), 1, 2};
        } else if (b >= 0xE0 && b <= 0xEF) {
            p = {static_cast<char32_t>(b & 0x0F), 2, 3};
        } else if (b >= 0xF0 && b <= 0xF4) {
            p = {static_cast<char32_t>(b & 0x07), 3, 4};
        } else {
            out.valid = false;
            return out;
        }
        // A prefix that no continuation makes valid (E0 80, ED A0, F4 90) is refused as soon as
        // it is seen, so that it never becomes a pending state nothing can finish.
        char32_t first = 0, last = 0;
        if (!p.completions(first, last)) {
            out.valid = false;
            return out;
        }
        if (!p.pending()) {
            out.code_points.push_back(p.bits);
            p = {};
        }
    }
    out.tail = p;
    return out;
}

void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

} // namespace pi
