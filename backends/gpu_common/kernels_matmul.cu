// Dense matrix products: a group of 32 lanes per weight row for decode and small batches, a
// shared-memory tiled product for prompt batches.
#include "gpu_blas.hpp"
#include "gpu_dispatch.hpp"
#include "gpu_kernels.hpp"
#include "gpu_matvec.hpp"

namespace pi::gpu {

namespace {

// Up to this many tokens the row-per-group kernel reads each weight once per token group of
// vec_tokens; above, the tiled kernel reuses a weight tile for 64 tokens.
constexpr int64_t vec_max_tokens = 16;
constexpr int vec_tokens = 4;

// y[t][r] = w[r] . x[t] for the NT tokens from blockIdx.y * NT.
template <class W, int NT> __global__ void mul_mat_vec_kernel(view w, view x, view y) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * vec_groups + threadIdx.x / group;
    if (r >= w.ne1) return; // the whole group leaves together
    const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
    const int nt = x.ne1 - t0 < NT ? static_cast<int>(x.ne1 - t0) : NT;
    const float* xs[NT];
    for (int t = 0; t < NT; ++t)
        xs[t] = x.row<const float>(t0 + (t < nt ? t : 0));
    const unsigned char* rows[1] = {w.row_bytes(r)};
    float acc[NT][1];
    row_dot<W, 1, NT>(rows, w.ne0, xs, acc);
    if (threadIdx.x % group == 0)
        for (int t = 0; t < nt; ++t)
            y.row<float>(t0 + t)[r] = acc[t][0];
}

constexpr int tile_rows = 64;
constexpr int tile_tokens = 64;
constexpr int tile_k = 32;        // one quantized block, a whole number of every type's units
constexpr int tile_threads = 256; // 16 x 16, each 4 rows x 4 tokens

// A 64-row x 64-token block of y. Thread (tx, ty) owns rows tx + 16 i and tokens ty + 16 j, so
// consecutive threads write consecutive elements of a y row. The weight tile is staged a unit
// at a time (gpu_math.hpp: 16-byte loads for F32 and F16 rows on 16 bytes, 2-byte loads of a
// quarter block with one scale for Q4_0 and Q8_0): consecutive threads read consecutive units
// of a row, and each row of the tile is a run of consecutive bytes. Each element of y sums its
// products in k order, one FMA each, whatever the tile width.
template <class W> __global__ void mul_mat_tiled_kernel(view w, view x, view y) {
    static_assert(tile_k % W::unit == 0);
    constexpr int units_per_row = tile_k / W::unit;
    __shared__ float ws[tile_k][tile_rows + 1];
    __shared__ float xs[tile_k][tile_tokens + 1];
    const int64_t r0 = static_cast<int64_t>(blockIdx.x) * tile_rows;
    const int64_t t0 = static_cast<int64_t>(blockIdx.y) * tile_tokens;
    const int tx = threadIdx.x % 16;
    const int ty = threadIdx.x / 16;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < w.ne0; k0 += tile_k) {
        // Rows hold whole units (with_weights), so a unit starting inside the row ends there.
        for (int e = threadIdx.x; e < tile_rows * units_per_row; e += tile_threads) {
            const int rr = e / units_per_row, uu = e % units_per_row;
            const int64_t k = k0 + static_cast<int64_t>(uu) * W::unit;
            float v[W::unit];
            if (r0 + rr < w.ne1 && k < w.ne0)
                W::load_unit(w.row_bytes(r0 + rr), k / W::unit, v);
            else
                for (int q = 0; q < W::unit; ++q)
                    v[q] = 0.0f;
            for (int q = 0; q < W::unit; ++q)
                ws[uu * W::unit + q][rr] = v[q];
        }
        for (int e = threadIdx.x; e < tile_tokens * tile_k; e += tile_threads) {
            const int tt = e / tile_k, kk = e % tile_k;
            const bool xin = t0 + tt < x.ne1 && k0 + kk < x.ne0;
            xs[kk][tt] = xin ? x.row<const float>(t0 + tt)[k0 + kk] : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < tile_k; ++kk) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i)
                a[i] = ws[kk][tx + 16 * i];
            for (int j = 0; j < 4; ++j)
                b[j] = xs[kk][ty + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int j = 0; j < 4; ++j) {
        const int64_t t = t0 + ty + 16 * j;
        if (t >= y.ne1) continue;
        for (int i = 0; i < 4; ++i) {
            const int64_t r = r0 + tx + 16 * i;
            if (r < y.ne0) y.row<float>(t)[r] = acc[i][j];
        }
    }
}

} // namespace

bool product_shaped(const view& w, const view& x, const view& y) {
    return x.is(type_f32) && y.is(type_f32) && x.ne0 == w.ne0 && y.ne0 == w.ne1 && y.ne1 == x.ne1;
}

int mul_mat(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* y) {
    view vw, vx, vy;
    if (const int s = make_views({view_arg{w, &vw}, {x, &vx}, {y, &vy}}); s != PIB_OK) return s;
    if (!product_shaped(vw, vx, vy)) return PIB_ERR_INVALID_ARGUMENT;
    if (vw.ne1 == 0 || vx.ne1 == 0) return PIB_OK;
    if (vx.ne1 <= vec_max_tokens) {
        return with_weights(vw, [&]<class W>(W) {
            const unsigned blocks = blocks_for(vw.ne1, vec_groups);
            if (vx.ne1 == 1)
                launch(c, mul_mat_vec_kernel<W, 1>, dim3(blocks, 1), vec_threads, vw, vx, vy);
            else
                launch(c, mul_mat_vec_kernel<W, vec_tokens>,
                       dim3(blocks, blocks_for(vx.ne1, vec_tokens)), vec_threads, vw, vx, vy);
            return launch_status();
        });
    }
    // The library's calls go straight to the stream, after what is recorded so far.
    if (const int s = submit_recorded(c); s != PIB_OK) return s;
    if (blas_mul_mat(c, vw, vx, vy)) return launch_status();
    if (vx.ne1 > max_grid_yz * tile_tokens) return PIB_ERR_INVALID_ARGUMENT;
    return with_weights(vw, [&]<class W>(W) {
        const dim3 grid(blocks_for(vw.ne1, tile_rows), blocks_for(vx.ne1, tile_tokens));
        launch(c, mul_mat_tiled_kernel<W>, grid, tile_threads, vw, vx, vy);
        return launch_status();
    });
}

} // namespace pi::gpu
