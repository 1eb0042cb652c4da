#pragma once
// GPT-2's byte alphabet: each of the 256 byte values written as one printable code point, so a
// byte-level BPE vocabulary is a list of ordinary strings.
#include <cstdint>
#include <string>
#include <string_view>

namespace pi::byte_alphabet {

// The code point standing for byte b: 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF are themselves, the
// other 68 bytes are U+0100 onwards in ascending order.
uint32_t code_point(uint8_t b) noexcept;

// code_point(b) in UTF-8.
std::string text(uint8_t b);

// The bytes a token's text stands for: each character of the alphabet becomes its byte; any
// other character (not written by GPT-2-style converters) is kept as its own UTF-8 bytes.
std::string to_bytes(std::string_view token_text);

} // namespace pi::byte_alphabet
