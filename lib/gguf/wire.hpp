#pragma once
// Facts about the GGUF encoding shared by the reader, the arrays and the writer (internal to
// lib/gguf): the one place that turns values into bytes and back.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <variant>

#include "gguf/gguf.hpp"

namespace pi::gguf::wire {

static_assert(std::endian::native == std::endian::little,
              "GGUF fields are little-endian and are copied straight into host values");

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

template <typename T> T load(const uint8_t* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename T> void store(uint8_t* p, T v) noexcept {
    std::memcpy(p, &v, sizeof v);
}

// The fixed-size value of type t at p, widened as value::data and array_value::element hold it:
// unsigned integers as uint64, signed as int64, floats as double. A bool byte must already be
// known to be 0 or 1.
template <typename Variant> Variant decode(value_type t, const uint8_t* p) noexcept {
    switch (t) {
    case value_type::u8:
        return Variant(uint64_t{load<uint8_t>(p)});
    case value_type::i8:
        return Variant(int64_t{load<int8_t>(p)});
    case value_type::u16:
        return Variant(uint64_t{load<uint16_t>(p)});
    case value_type::i16:
        return Variant(int64_t{load<int16_t>(p)});
    case value_type::u32:
        return Variant(uint64_t{load<uint32_t>(p)});
    case value_type::i32:
        return Variant(int64_t{load<int32_t>(p)});
    case value_type::u64:
        return Variant(load<uint64_t>(p));
    case value_type::i64:
        return Variant(load<int64_t>(p));
    case value_type::f32:
        return Variant(double{load<float>(p)});
    case value_type::f64:
        return Variant(load<double>(p));
    case value_type::boolean:
        return Variant(load<uint8_t>(p) == 1);
    case value_type::string:
    case value_type::array:
        break;
    }
    return Variant(uint64_t{0});
}

// True when v holds the widened form decode() gives for type t, with a value that fits t.
template <typename Variant> bool fits(value_type t, const Variant& v) noexcept {
    const int bits = static_cast<int>(8 * scalar_size(t));
    if (is_unsigned(t)) {
        const uint64_t* u = std::get_if<uint64_t>(&v);
        return u && (bits == 64 || *u >> bits == 0);
    }
    if (is_signed(t)) {
        const int64_t* s = std::get_if<int64_t>(&v);
        const int64_t bound = std::numeric_limits<int64_t>::max() >> (64 - bits);
        return s && *s <= bound && *s >= -bound - 1;
    }
    if (is_float(t)) return std::holds_alternative<double>(v);
    if (t == value_type::boolean) return std::holds_alternative<bool>(v);
    return false;
}

// Writes v, which fits(t, v), as scalar_size(t) bytes at p.
template <typename Variant> void encode(value_type t, const Variant& v, uint8_t* p) noexcept {
    switch (t) {
    case value_type::u8:
        return store(p, static_cast<uint8_t>(std::get<uint64_t>(v)));
    case value_type::i8:
        return store(p, static_cast<int8_t>(std::get<int64_t>(v)));
    case value_type::u16:
        return store(p, static_cast<uint16_t>(std::get<uint64_t>(v)));
    case value_type::i16:
        return store(p, static_cast<int16_t>(std::get<int64_t>(v)));
    case value_type::u32:
        return store(p, static_cast<uint32_t>(std::get<uint64_t>(v)));
    case value_type::i32:
        return store(p, static_cast<int32_t>(std::get<int64_t>(v)));
    case value_type::u64:
        return store(p, std::get<uint64_t>(v));
    case value_type::i64:
        return store(p, std::get<int64_t>(v));
    case value_type::f32:
        return store(p, static_cast<float>(std::get<double>(v)));
    case value_type::f64:
        return store(p, std::get<double>(v));
    case value_type::boolean:
        return store(p, static_cast<uint8_t>(std::get<bool>(v) ? 1 : 0));
    case value_type::string:
    case value_type::array:
        break;
    }
}

// How `count` elements of type t at the start of `bytes` are laid out: where they end, or the
// first thing that keeps them from being well-formed.
struct array_layout {
    enum class fault {
        none,
        short_elements, // fixed-size elements: fewer bytes than count of them take
        short_length,   // no room for the next string's u64 length
        long_string,    // a string length beyond the bytes that remain
        bad_bool,       // a bool byte neither 0 nor 1
    };
    fault problem = fault::none;
    uint64_t end = 0;   // none: the bytes the elements take; otherwise where the fault lies
    uint64_t index = 0; // the element at fault
    uint64_t found = 0; // the string length or bool byte at fault
};
array_layout lay_out(value_type t, uint64_t count, std::span<const uint8_t> bytes) noexcept;

} // namespace pi::gguf::wire
