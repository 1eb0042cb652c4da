// GPT-2's bytes_to_unicode and its inverse.
#include "tokenizer/byte_alphabet.hpp"

#include <array>

#include "tokenizer/unicode_classes.hpp"

namespace pi::byte_alphabet {
namespace {

bool is_self(unsigned b) noexcept {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct tables {
    std::array<uint32_t, 256> cp_of_byte{};
    std::array<int16_t, 0x100 + 68> byte_of_cp{}; // every alphabet code point is below 0x144
};

const tables& get() noexcept {
    static const tables t = [] {
        tables r;
        r.byte_of_cp.fill(-1);
        uint32_t next = 0x100;
        for (unsigned b = 0; b < 256; ++b) {
            r.cp_of_byte[b] = is_self(b) ? b : next++;
            r.byte_of_cp[r.cp_of_byte[b]] = static_cast<int16_t>(b);
        }
        return r;
    }();
    return t;
}

void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else { // the alphabet stops at U+0143: two bytes at most
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

} // namespace

uint32_t code_point(uint8_t b) noexcept {
    return get().cp_of_byte[b];
}

std::string text(uint8_t b) {
    std::string s;
    append_utf8(s, code_point(b));
    return s;
}

std::string to_bytes(std::string_view token_text) {
    const tables& t = get();
    std::string out;
    out.reserve(token_text.size());
    for (size_t at = 0; at < token_text.size();) {
        const unicode::decoded d = unicode::decode_utf8(token_text, at);
        if (d.valid && d.cp < t.byte_of_cp.size() && t.byte_of_cp[d.cp] >= 0)
            out += static_cast<char>(t.byte_of_cp[d.cp]);
        else
            out.append(token_text.substr(at, d.n_bytes));
        at += d.n_bytes;
    }
    return out;
}

} // namespace pi::byte_alphabet
