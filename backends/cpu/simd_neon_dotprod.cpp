// The NEON kernels with the dot-product extension (FEAT_DotProd, Armv8.2-A and later), compiled
// with it enabled for this file only: sdot gives the block products' exact int32 group sums, so
// the results are those of simd_neon.cpp bit for bit.
#include "simd_neon_impl.hpp"

namespace pi::cpu {

namespace {

struct sdot {
    static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
};

constexpr simd_kernels table = simd::neon_impl<sdot>::table();

} // namespace

const simd_kernels& neon_dotprod_kernels() noexcept {
    return table;
}

} // namespace pi::cpu
