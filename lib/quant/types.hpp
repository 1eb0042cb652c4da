#pragma once
// The ggml tensor type table: every room asks here for block sizes and names.
// Plain C++ with no exceptions so that backends may include it.
#include <cstddef>
#include <cstdint>

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

struct type_traits {
    const char* name;  // nullptr for ids that are not a type
    uint32_t block_size;  // elements per block
    uint32_t type_size;   // bytes per block
};

// Traits for a raw type id; name == nullptr when the id is unknown or removed.
type_traits traits_of(uint32_t type_id) noexcept;
inline type_traits traits_of(ggml_type t) noexcept { return traits_of(static_cast<uint32_t>(t)); }

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(ggml_type t, int64_t n) noexcept {
    const type_traits tt = traits_of(t);
    return static_cast<size_t>(n / tt.block_size) * tt.type_size;
}

float fp16_to_fp32(uint16_t h) noexcept;
uint16_t fp32_to_fp16(float f) noexcept; // round to nearest even, like F16C

} // namespace pi
