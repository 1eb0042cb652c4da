// The NEON kernels of every AArch64 CPU (NEON is part of the base architecture): int8 block
// products widen to int16 (smull) and add pairwise into int32 (sadalp).
#include "simd_neon_impl.hpp"

namespace pi::cpu {

namespace {

struct widening_dot {
    static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
        acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
        return vpadalq_s16(acc, vmull_high_s8(a, b));
    }
};

constexpr simd_kernels table = simd::neon_impl<widening_dot>::table();

} // namespace

const simd_kernels& neon_kernels() noexcept {
    return table;
}

} // namespace pi::cpu
