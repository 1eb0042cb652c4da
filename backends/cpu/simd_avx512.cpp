// The fast kernels for AVX-512 (F, BW, VL), compiled with those sets enabled for this file only.
// F16 weights are widened with vcvtph2ps and every sum is a float FMA chain; half-precision
// arithmetic (AVX512-FP16) would lose accuracy and gains nothing on memory-bound loops.
#include "simd_avx512_vec.hpp"
#include "simd_impl.hpp"

namespace pi::cpu {

namespace {

constexpr simd_kernels table = simd::impl<avx512>::table();

} // namespace

const simd_kernels& avx512_kernels() noexcept {
    return table;
}

} // namespace pi::cpu
