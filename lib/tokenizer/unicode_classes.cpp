// Code-point class lookup and lenient UTF-8 decoding for the BPE pre-tokenizer.
#include "tokenizer/unicode_classes.hpp"

#include <algorithm>
#include <array>

namespace pi::unicode {
namespace {

// ASCII is most of most texts: one table lookup instead of a binary search.
std::array<cp_class, 128> ascii_classes() noexcept {
    std::array<cp_class, 128> t{};
    for (const class_range& r : class_ranges()) {
        if (r.first >= 128) break;
        for (uint32_t cp = r.first; cp <= r.last && cp < 128; ++cp)
            t[cp] = r.cls;
    }
    return t;
}

} // namespace

cp_class class_of(uint32_t cp) noexcept {
    static const std::array<cp_class, 128> ascii = ascii_classes();
    if (cp < 128) return ascii[cp];
    const std::span<const class_range> ranges = class_ranges();
    const auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                                     [](uint32_t v, const class_range& r) { return v < r.first; });
    if (it == ranges.begin()) return cp_class::other;
    const class_range& r = *(it - 1);
    return cp <= r.last ? r.cls : cp_class::other;
}

// Structural UTF-8 only (a lead byte and its continuation bytes), as llama.cpp decodes: an
// overlong form still names a code point. What does not parse is one invalid byte, kept as is so
// that byte-level BPE can still spell it.
decoded decode_utf8(std::string_view text, size_t at) noexcept {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t lead = byte(at);
    if (lead < 0x80) return {lead, 1, true};
    size_t n = 0;
    uint32_t cp = 0;
    if ((lead & 0xE0) == 0xC0) {
        n = 2;
        cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
        n = 3;
        cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
        n = 4;
        cp = lead & 0x07;
    } else {
        return {lead, 1, false};
    }
    if (text.size() - at < n) return {lead, 1, false};
    for (size_t i = 1; i < n; ++i) {
        const uint8_t c = byte(at + i);
        if ((c & 0xC0) != 0x80) return {lead, 1, false};
        cp = (cp << 6) | (c & 0x3F);
    }
    return {cp, static_cast<uint8_t>(n), true};
}

} // namespace pi::unicode
