// The sparse FFN: active-neuron selection, the row-sparse product (gate/up) and the
// column-sparse accumulate (down).
#include "gpu_dispatch.hpp"
#include "gpu_kernels.hpp"
#include "gpu_matvec.hpp"

#include <algorithm>

namespace pi::gpu {

namespace {

constexpr int threads = 256;

// Shapes shared by the sparse kernels: per-token index lists idx (I32 [>= max count][n_tok])
// with their lengths count (I32 [n_tok]).
bool lists_shaped(const view& idx, const view& count, int64_t n_tok) {
    return idx.is(type_i32) && idx.ne1 == n_tok && is_i32_vector(count, n_tok);
}

// count[t] when it lies in [0, capacity]; else the fault flag is raised and the token has no
// list.
__device__ __forceinline__ int32_t checked_count(const view& count, int64_t t, int64_t capacity,
                                                 int* fault) {
    const int32_t n = count.row<const int32_t>(0)[t];
    if (n >= 0 && n <= capacity) return n;
    *fault = 1;
    return 0;
}

__global__ void zero_kernel(view y) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= y.ne0) return;
    for (int64_t r = blockIdx.y; r < y.ne1; r += gridDim.y)
        y.row<float>(r)[i] = 0.0f;
}

// Groups walk the list positions of each token: y[t][idx[t][k]] = w[idx[t][k]] . x[t]. The grid
// is sized for the device, not for the list capacity, so mostly inactive lists cost no blocks.
template <class W>
__global__ void mul_rows_kernel(view w, view x, view idx, view count, view y, int* fault) {
    const int64_t first = static_cast<int64_t>(blockIdx.x) * vec_groups + threadIdx.x / group;
    const int64_t step = static_cast<int64_t>(gridDim.x) * vec_groups;
    for (int64_t t = blockIdx.y; t < x.ne1; t += gridDim.y) {
        const int32_t n = checked_count(count, t, idx.ne0, fault);
        const float* xs[1] = {x.row<const float>(t)};
        for (int64_t k = first; k < n; k += step) {
            const int32_t r = idx.row<const int32_t>(t)[k];
            if (r < 0 || r >= w.ne1) {
                *fault = 1;
                continue;
            }
            float acc[1];
            row_dot<W, 1>(w.row_bytes(r), w.ne0, xs, acc);
            if (threadIdx.x % group == 0) y.row<float>(t)[r] = acc[0];
        }
    }
}

// Column j of token t, list positions [seg * seg_len, (seg + 1) * seg_len): the sum of
// a[t][i] * wt[i][j] over the listed i with a non-zero coefficient, in list order. The block
// stages each run of list entries (index, coefficient) in shared memory. With `partial` the
// segment's sum goes there, else it is added to y.
template <class W>
__global__ void axpy_rows_kernel(view wt, view a, view idx, view count, view y, int64_t seg_len,
                                 float* partial, int* fault) {
    __shared__ int32_t rows[threads];
    __shared__ float coefs[threads];
    const int64_t j = static_cast<int64_t>(blockIdx.x) * threads + threadIdx.x;
    const int64_t seg = blockIdx.z;
    for (int64_t t = blockIdx.y; t < a.ne1; t += gridDim.y) {
        const int64_t n = checked_count(count, t, idx.ne0, fault);
        const int64_t k0 = seg * seg_len;
        const int64_t k1 = k0 + seg_len < n ? k0 + seg_len : n;
        const int32_t* list = idx.row<const int32_t>(t);
        const float* at = a.row<const float>(t);
        float acc = 0.0f;
        for (int64_t base = k0; base < k1; base += threads) {
            __syncthreads(); // the previous run is consumed
            const int64_t k = base + threadIdx.x;
            if (k < k1) {
                const int32_t i = list[k];
                const bool ok = i >= 0 && i < wt.ne1;
                if (!ok) *fault = 1;
                rows[threadIdx.x] = ok ? i : 0;
                coefs[threadIdx.x] = ok ? at[i] : 0.0f;
            }
            __syncthreads();
            const int64_t run = k1 - base < threads ? k1 - base : threads;
            if (j < wt.ne0)
                for (int64_t e = 0; e < run; ++e)
                    if (coefs[e] != 0.0f)
                        acc = fmaf(coefs[e], W::load(wt.row_bytes(rows[e]), j), acc);
        }
        if (j >= wt.ne0) continue;
        if (partial != nullptr)
            partial[(seg * a.ne1 + t) * wt.ne0 + j] = acc;
        else
            y.row<float>(t)[j] += acc;
    }
}

// y[t][j] += the segments' partial sums, in segment order.
__global__ void axpy_reduce_kernel(const float* partial, int64_t n_seg, view y) {
    const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= y.ne0) return;
    for (int64_t t = blockIdx.y; t < y.ne1; t += gridDim.y) {
        float s = 0.0f;
        for (int64_t g = 0; g < n_seg; ++g)
            s += partial[(g * y.ne1 + t) * y.ne0 + j];
        y.row<float>(t)[j] += s;
    }
}

constexpr int select_items = 8; // consecutive elements per thread and pass

// One block per token: each pass flags select_items * threads elements, an exclusive scan of
// the per-thread counts gives every thread its place in the list, so the list is ascending.
// Entries past the list's capacity are not written; the count is, and it raises the fault.
__global__ void select_kernel(view p, float threshold, view idx, view count, int* fault) {
    __shared__ int32_t scan[threads];
    for (int64_t t = blockIdx.x; t < p.ne1; t += gridDim.x) {
        const float* pt = p.row<const float>(t);
        int32_t* list = idx.row<int32_t>(t);
        int64_t found = 0;
        for (int64_t pass = 0; pass < p.ne0; pass += select_items * threads) {
            const int64_t i0 = pass + static_cast<int64_t>(threadIdx.x) * select_items;
            int32_t mine = 0;
            for (int e = 0; e < select_items; ++e)
                mine += i0 + e < p.ne0 && pt[i0 + e] >= threshold ? 1 : 0;
            __syncthreads(); // the previous pass has read scan[threads - 1]
            scan[threadIdx.x] = mine;
            __syncthreads();
            for (int off = 1; off < threads; off *= 2) {
                const int32_t v =
                    static_cast<int>(threadIdx.x) >= off ? scan[threadIdx.x - off] : 0;
                __syncthreads();
                scan[threadIdx.x] += v;
                __syncthreads();
            }
            int64_t at = found + scan[threadIdx.x] - mine;
            for (int e = 0; e < select_items; ++e) {
                const int64_t i = i0 + e;
                if (i < p.ne0 && pt[i] >= threshold) {
                    if (at < idx.ne0) list[at] = static_cast<int32_t>(i);
                    ++at;
                }
            }
            found += scan[threads - 1];
        }
        if (threadIdx.x == 0) {
            count.row<int32_t>(0)[t] = static_cast<int32_t>(found);
            if (found > idx.ne0) *fault = 1;
        }
    }
}

} // namespace

int mul_mat_sparse(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* idx,
                   const pib_tensor* count, const pib_tensor* y) {
    view vw, vx, vi, vc, vy;
    if (const int s = make_views({view_arg{w, &vw}, {x, &vx}, {idx, &vi}, {count, &vc}, {y, &vy}});
        s != PIB_OK)
        return s;
    if (!product_shaped(vw, vx, vy) || !lists_shaped(vi, vc, vx.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    return with_weights(vw, [&]<class W>(W) {
        if (vy.ne0 == 0 || vy.ne1 == 0) return static_cast<int>(PIB_OK);
        launch(zero_kernel, grid_2d(vy.ne0, vy.ne1, threads), threads, c.stream, vy);
        if (const int s = launch_status(); s != PIB_OK) return s;
        // At most 8 blocks per multiprocessor and token; groups loop over longer lists. One
        // block at least, which checks the counts of lists without capacity.
        const int64_t list_blocks =
            std::clamp<int64_t>(blocks_for(vi.ne0, vec_groups), 1, 8 * c.multiprocessors);
        const dim3 grid(static_cast<unsigned>(list_blocks),
                        static_cast<unsigned>(std::min(vx.ne1, max_grid_yz)));
        launch(mul_rows_kernel<W>, grid, vec_threads, c.stream, vw, vx, vi, vc, vy, c.fault);
        return launch_status();
    });
}

int axpy_sparse(context& c, const pib_tensor* wt, const pib_tensor* a, const pib_tensor* idx,
                const pib_tensor* count, const pib_tensor* y) {
    view vw, va, vi, vc, vy;
    if (const int s = make_views({view_arg{wt, &vw}, {a, &va}, {idx, &vi}, {count, &vc}, {y, &vy}});
        s != PIB_OK)
        return s;
    if (!va.is(type_f32) || !vy.is(type_f32) || va.ne0 != vw.ne1 || vy.ne0 != vw.ne0 ||
        vy.ne1 != va.ne1 || !lists_shaped(vi, vc, va.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    return with_weight_elements(vw.type, [&]<class W>(W) {
        if (vy.ne0 == 0 || vy.ne1 == 0) return static_cast<int>(PIB_OK);
        // Few output blocks (one decode token) would leave most multiprocessors idle, so the
        // lists are split into segments summed separately, then added in a fixed order.
        const int64_t col_blocks = blocks_for(vy.ne0, threads);
        const int64_t tok_blocks = vy.ne1 < max_grid_yz ? vy.ne1 : max_grid_yz;
        const int64_t want = 4 * static_cast<int64_t>(c.multiprocessors);
        int64_t n_seg = (want + col_blocks * tok_blocks - 1) / (col_blocks * tok_blocks);
        const int64_t max_by_list = (vi.ne0 + threads - 1) / threads;
        const int64_t max_by_scratch = static_cast<int64_t>(c.scratch_floats) / (vy.ne0 * vy.ne1);
        n_seg = n_seg < max_by_list ? n_seg : max_by_list;
        n_seg = n_seg < max_by_scratch ? n_seg : max_by_scratch;
        n_seg = n_seg < 64 ? n_seg : 64;
        if (n_seg < 1) n_seg = 1;
        const int64_t seg_len = (vi.ne0 + n_seg - 1) / n_seg;
        float* partial = n_seg > 1 ? c.scratch : nullptr;
        const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(tok_blocks),
                        static_cast<unsigned>(n_seg));
        launch(axpy_rows_kernel<W>, grid, threads, c.stream, vw, va, vi, vc, vy, seg_len, partial,
               c.fault);
        if (const int s = launch_status(); s != PIB_OK || partial == nullptr) return s;
        launch(axpy_reduce_kernel, grid_2d(vy.ne0, vy.ne1, threads), threads, c.stream, partial,
               n_seg, vy);
        return launch_status();
    });
}

int select_active(context& c, const pib_tensor* p, float threshold, const pib_tensor* idx,
                  const pib_tensor* count) {
    view vp, vi, vc;
    if (const int s = make_views({view_arg{p, &vp}, {idx, &vi}, {count, &vc}}); s != PIB_OK)
        return s;
    if (!vp.is(type_f32) || !lists_shaped(vi, vc, vp.ne1) || vp.ne0 > INT32_MAX)
        return PIB_ERR_INVALID_ARGUMENT;
    if (vp.ne1 == 0) return PIB_OK;
    launch(select_kernel, blocks_for(vp.ne1, 1), threads, c.stream, vp, threshold, vi, vc, c.fault);
    return launch_status();
}

} // namespace pi::gpu
