#pragma once
// Facts about the GGUF encoding shared by the reader and the writer (internal to lib/gguf).
#include <cstddef>
#include <cstdint>

#include "gguf/gguf.hpp"

namespace pi::gguf::wire {

inline constexpr char magic_dense[4] = {'G', 'G', 'U', 'F'};
inline constexpr char magic_sparse[4] = {'P', 'W', 'R', 'I'};
inline constexpr uint32_t version = 3;
inline constexpr uint64_t default_alignment = 32;
inline constexpr int max_dims = 4;
inline constexpr const char* alignment_key = "general.alignment";

inline bool is_known(uint32_t t) noexcept {
    return t <= static_cast<uint32_t>(value_type::f64);
}

// Encoded size of a scalar, 0 for string and array.
inline size_t scalar_size(value_type t) noexcept {
    switch (t) {
    case value_type::u8:
    case value_type::i8:
    case value_type::boolean:
        return 1;
    case value_type::u16:
    case value_type::i16:
        return 2;
    case value_type::u32:
    case value_type::i32:
    case value_type::f32:
        return 4;
    case value_type::u64:
    case value_type::i64:
    case value_type::f64:
        return 8;
    case value_type::string:
    case value_type::array:
        return 0;
    }
    return 0;
}

inline bool is_unsigned(value_type t) noexcept {
    return t == value_type::u8 || t == value_type::u16 || t == value_type::u32 ||
           t == value_type::u64;
}
inline bool is_signed(value_type t) noexcept {
    return t == value_type::i8 || t == value_type::i16 || t == value_type::i32 ||
           t == value_type::i64;
}
inline bool is_float(value_type t) noexcept {
    return t == value_type::f32 || t == value_type::f64;
}

inline bool is_power_of_two(uint64_t v) noexcept {
    return v != 0 && (v & (v - 1)) == 0;
}

} // namespace pi::gguf::wire
