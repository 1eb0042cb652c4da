#pragma once
// FNV-1a, 64 bits: the one hash the library uses to tell files apart (GPU index staleness, saved
// state). Not cryptographic.
#include <cstddef>
#include <cstdint>
#include <span>

namespace pi {

inline constexpr uint64_t fnv1a_basis = 0xcbf29ce484222325ull;

// Continues hash h over the bytes.
inline uint64_t fnv1a(std::span<const uint8_t> bytes, uint64_t h = fnv1a_basis) noexcept {
    for (const uint8_t b : bytes)
        h = (h ^ b) * 0x100000001b3ull;
    return h;
}

} // namespace pi
