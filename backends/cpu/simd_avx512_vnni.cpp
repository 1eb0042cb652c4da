// The AVX-512 kernels with VNNI, compiled with AVX512-VNNI enabled for this file only: vpdpbusd
// replaces maddubs + madd + add in the quantized products. Both give the exact int32 group sums,
// so the results are those of simd_avx512.cpp bit for bit; with VNNI, Q8_0 codes are offset to
// unsigned like the others instead of sign-adjusted per product.
#include "simd_avx512_vec.hpp"
#include "simd_impl.hpp"

namespace pi::cpu {

namespace {

struct avx512_vnni : avx512 {
    static constexpr bool vnni = true;
    [[gnu::always_inline]] static ivec dot(ivec acc, ivec u, ivec x) {
        return _mm512_dpbusd_epi32(acc, u, x);
    }
};

constexpr simd_kernels table = simd::impl<avx512_vnni>::table();

} // namespace

const simd_kernels& avx512_vnni_kernels() noexcept {
    return table;
}

} // namespace pi::cpu
