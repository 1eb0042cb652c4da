#pragma once
// The ggml tensor type table: every room asks here for block sizes and names.
// Plain C++ with no exceptions so that backends may include it.
#include <cstddef>
#include <cstdint>
#include <span>

namespace pi {

enum class ggml_type : uint32_t {
    f32 = 0,
    f16 = 1,
    q4_0 = 2,
    q4_1 = 3,
    q5_0 = 6,
    q5_1 = 7,
    q8_0 = 8,
    q8_1 = 9,
    q2_k = 10,
    q3_k = 11,
    q4_k = 12,
    q5_k = 13,
    q6_k = 14,
    q8_k = 15,
    i8 = 16,
    i16 = 17,
    i32 = 18,
};

// Row converters between a type's bytes and floats: n elements, a multiple of the block size.
// The byte side needs no alignment (file data may sit at any offset).
using to_float_fn = void (*)(const void* src, float* dst, int64_t n) noexcept;
using from_float_fn = void (*)(const float* src, void* dst, int64_t n) noexcept;

struct type_traits {
    const char* name;                   // nullptr for ids that are not a type
    uint32_t block_size;                // elements per block
    uint32_t type_size;                 // bytes per block
    to_float_fn to_float = nullptr;     // F32, F16, Q4_0..Q8_0, Q2_K..Q6_K; else nullptr
    from_float_fn from_float = nullptr; // reference quantizer (quant/quantize.hpp); same types
};

// Traits for a raw type id; name == nullptr when the id is unknown or removed.
type_traits traits_of(uint32_t type_id) noexcept;
inline type_traits traits_of(ggml_type t) noexcept {
    return traits_of(static_cast<uint32_t>(t));
}

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(ggml_type t, int64_t n) noexcept {
    const type_traits tt = traits_of(t);
    return static_cast<size_t>(n / tt.block_size) * tt.type_size;
}

// Checked dispatch through the table: false (and nothing written) when the type has no
// converter, src.size() is not a multiple of the block size, or dst has not exactly the bytes
// (or floats) of src.
bool quantize_row(ggml_type type, std::span<const float> src, std::span<uint8_t> dst) noexcept;
bool dequantize_row(ggml_type type, std::span<const uint8_t> src, std::span<float> dst) noexcept;

float fp16_to_fp32(uint16_t h) noexcept;
uint16_t fp32_to_fp16(float f) noexcept; // round to nearest even, like F16C

} // namespace pi
