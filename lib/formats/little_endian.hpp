#pragma once
// The one little-endian field read of the formats readers (zip headers, pickle opcodes' operands,
// tensor elements); callers have checked that `n` bytes lie at `p`.
#include <cstddef>
#include <cstdint>

namespace pi::formats {

inline uint64_t read_le(const uint8_t* p, size_t n) noexcept {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

} // namespace pi::formats
