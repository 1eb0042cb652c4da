#pragma once
// The dot product of one weight row with up to NT activation rows by a group of 32 lanes, shared
// by the dense and the row-sparse kernels.
#include "gpu_context.hpp"

namespace pi::gpu {

// Groups (weight rows) per block of the row-per-group kernels.
inline constexpr int vec_groups = 4;
inline constexpr int vec_threads = vec_groups * group;

// acc[t] = row . xs[t] over n elements, the same value in every lane of the calling group. Lane
// l converts units l, l + 32, ... once and uses them for every token.
template <class W, int NT>
__device__ __forceinline__ void row_dot(const unsigned char* row, int64_t n,
                                        const float* const (&xs)[NT], float (&acc)[NT]) {
    const int lane = threadIdx.x % group;
    for (int t = 0; t < NT; ++t)
        acc[t] = 0.0f;
    const int64_t units = n / W::unit;
    for (int64_t u = lane; u < units; u += group) {
        float v[W::unit];
        W::load_unit(row, u, v);
        for (int t = 0; t < NT; ++t)
            acc[t] = dot_unit(v, xs[t] + u * W::unit, acc[t]);
    }
    for (int t = 0; t < NT; ++t)
        acc[t] = group_sum(acc[t]);
}

// x and y fit a product with w: x F32 [cols][n_tok], y F32 [rows][n_tok].
bool product_shaped(const view& w, const view& x, const view& y);

} // namespace pi::gpu
