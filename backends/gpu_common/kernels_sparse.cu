// The sparse FFN: active-neuron selection, the row-sparse product (gate/up) and the
// column-sparse accumulate (down).
#include "gpu_dispatch.hpp"
#include "gpu_kernels.hpp"
#include "gpu_matvec.hpp"
#include "pib_tensor_extent.h"

#include <algorithm>
#include <type_traits>

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

// M matrices of one shape and their outputs, passed to a kernel by value.
template <int M> struct views { view v[M]; };

// Groups walk the list positions of each token: y[m][t][idx[t][k]] = w[m][idx[t][k]] . x[t],
// the M matrices' rows read together so each element of x is loaded once for all of them. The
// grid is sized for the device, not for the list capacity, so mostly inactive lists cost no
// blocks.
template <class W, int M>
__global__ void mul_rows_kernel(views<M> w, view x, view idx, view count, views<M> y, int* fault) {
    const int64_t first = static_cast<int64_t>(blockIdx.x) * vec_groups + threadIdx.x / group;
    const int64_t step = static_cast<int64_t>(gridDim.x) * vec_groups;
    for (int64_t t = blockIdx.y; t < x.ne1; t += gridDim.y) {
        const int32_t n = checked_count(count, t, idx.ne0, fault);
        const float* xs[1] = {x.row<const float>(t)};
        for (int64_t k = first; k < n; k += step) {
            const int32_t r = idx.row<const int32_t>(t)[k];
            if (r < 0 || r >= w.v[0].ne1) {
                *fault = 1;
                continue;
            }
            const unsigned char* rows[M];
            for (int m = 0; m < M; ++m)
                rows[m] = w.v[m].row_bytes(r);
            float acc[1][M];
            row_dot<W, M, 1>(rows, w.v[0].ne0, xs, acc);
            if (threadIdx.x % group == 0)
                for (int m = 0; m < M; ++m)
                    y.v[m].template row<float>(t)[r] = acc[0][m];
        }
    }
}

// Listed rows of ffn_down_t whose slices the quantized accumulate copies at once.
constexpr int axpy_stage_rows = 32;

// A block's 256 columns are 8 quantized blocks of each row: their bytes as aligned words, and
// one word more for a row that starts 2 bytes into a word.
template <class W> struct axpy_slice {
    static constexpr int blocks = threads / static_cast<int>(W::block);
    static constexpr int bytes = blocks * static_cast<int>(W::block_bytes);
    static constexpr int words = bytes / 4 + 1;
    static_assert(bytes % 4 == 0, "slices keep a row's word offset");
};

// acc + the sum over the run's entries e with a non-zero coefficient of coefs[e] *
// wt[rows[e]][j], in entry order; every thread of the block calls. F32 and F16: adjacent
// threads load adjacent elements of a row. Quantized rows: adjacent columns share blocks, so
// the block copies the slices of 32 listed rows at a time as aligned words (threads loading
// adjacent words, each of the block's bytes once instead of a scale per thread), and each
// thread converts its element from the copy: the same values, summed in the same order, as
// loading them from the row.
template <class W>
__device__ __forceinline__ float axpy_run(const view& wt, const int32_t* rows, const float* coefs,
                                          int run, int64_t j, float acc) {
    if constexpr (quantized<W>) {
        using slice = axpy_slice<W>;
        constexpr int words = slice::words;
        __shared__ uint32_t stage[axpy_stage_rows][words];
        const int64_t b0 = static_cast<int64_t>(blockIdx.x) * slice::blocks;
        const int64_t left = wt.ne0 / W::block - b0;
        const int bytes =
            static_cast<int>(left < slice::blocks ? left : slice::blocks) * W::block_bytes;
        const int blk = static_cast<int>(threadIdx.x / W::block) * W::block_bytes;
        const int within = static_cast<int>(threadIdx.x % W::block);
        for (int sub = 0; sub < run; sub += axpy_stage_rows) {
            const int rn = run - sub < axpy_stage_rows ? run - sub : axpy_stage_rows;
            for (int q = threadIdx.x; q < rn * words; q += threads) {
                const int e = q / words, w = q % words;
                if (coefs[sub + e] == 0.0f) continue; // skipped below, so never loaded
                const unsigned char* begin = W::block_at(wt.row_bytes(rows[sub + e]), b0);
                if (w < range_words(begin, begin + bytes))
                    stage[e][w] = range_word(begin, begin + bytes, w);
            }
            __syncthreads();
            if (j < wt.ne0)
                for (int e = 0; e < rn; ++e) {
                    const float c = coefs[sub + e];
                    if (c == 0.0f) continue;
                    const int lead = static_cast<int>(
                        reinterpret_cast<std::uintptr_t>(wt.row_bytes(rows[sub + e])) % 4);
                    acc = fmaf(c, W::element_from_words(stage[e], lead + blk, within), acc);
                }
            __syncthreads(); // the next rows' copy overwrites these
        }
    } else if (j < wt.ne0) {
        for (int e = 0; e < run; ++e)
            if (coefs[e] != 0.0f) acc = fmaf(coefs[e], W::load(wt.row_bytes(rows[e]), j), acc);
    }
    return acc;
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
            const int run = k1 - base < threads ? static_cast<int>(k1 - base) : threads;
            acc = axpy_run<W>(wt, rows, coefs, run, j, acc);
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

// Whether two F32 views share a byte.
bool overlap(const view& a, const view& b) {
    return pib_f32_views_overlap(a.base, a.ne0, a.ne1, a.nb1, b.base, b.ne0, b.ne1, b.nb1) != 0;
}

// The row-sparse product of M checked matrices of one shape and traits W, sharing x and the
// lists: zeroes the outputs, then one kernel writes the listed rows of all of them.
template <class W, int M>
int sparse_rows(context& c, const views<M>& w, const view& x, const view& idx, const view& count,
                const views<M>& y) {
    if (y.v[0].ne0 == 0 || y.v[0].ne1 == 0) return PIB_OK;
    for (int m = 0; m < M; ++m) {
        launch(c, zero_kernel, grid_2d(y.v[m].ne0, y.v[m].ne1, threads), threads, y.v[m]);
        if (const int s = launch_status(); s != PIB_OK) return s;
    }
    // At most 8 blocks per multiprocessor and token; groups loop over longer lists. One block
    // at least, which checks the counts of lists without capacity.
    const int64_t list_blocks =
        std::clamp<int64_t>(blocks_for(idx.ne0, vec_groups), 1, 8 * c.multiprocessors);
    const dim3 grid(static_cast<unsigned>(list_blocks),
                    static_cast<unsigned>(std::min(x.ne1, max_grid_yz)));
    launch(c, mul_rows_kernel<W, M>, grid, vec_threads, w, x, idx, count, y, c.fault);
    return launch_status();
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
    return with_weights(
        vw, [&]<class W>(W) { return sparse_rows<W, 1>(c, views<1>{{vw}}, vx, vi, vc, {{vy}}); });
}

int mul_mat_sparse2(context& c, const pib_tensor* w0, const pib_tensor* w1, const pib_tensor* x,
                    const pib_tensor* idx, const pib_tensor* count, const pib_tensor* y0,
                    const pib_tensor* y1) {
    view vw0, vw1, vx, vi, vc, vy0, vy1;
    if (const int s = make_views({view_arg{w0, &vw0},
                                  {w1, &vw1},
                                  {x, &vx},
                                  {idx, &vi},
                                  {count, &vc},
                                  {y0, &vy0},
                                  {y1, &vy1}});
        s != PIB_OK)
        return s;
    if (!vw0.same_shape(vw1) || overlap(vy0, vy1) || !product_shaped(vw0, vx, vy0) ||
        !product_shaped(vw1, vx, vy1) || !lists_shaped(vi, vc, vx.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    // One kernel where both matrices take the same traits (the FFN's up and gate do); else, as
    // for F32 rows of which only one pair starts on 16 bytes, one product after the other.
    return with_weights(vw0, [&]<class W0>(W0) {
        return with_weights(vw1, [&]<class W1>(W1) {
            if constexpr (std::is_same_v<W0, W1>) {
                return sparse_rows<W0, 2>(c, views<2>{{vw0, vw1}}, vx, vi, vc, {{vy0, vy1}});
            } else {
                if (const int s = sparse_rows<W0, 1>(c, views<1>{{vw0}}, vx, vi, vc, {{vy0}});
                    s != PIB_OK)
                    return s;
                return sparse_rows<W1, 1>(c, views<1>{{vw1}}, vx, vi, vc, {{vy1}});
            }
        });
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
        launch(c, axpy_rows_kernel<W>, grid, threads, vw, va, vi, vc, vy, seg_len, partial,
               c.fault);
        if (const int s = launch_status(); s != PIB_OK || partial == nullptr) return s;
        launch(c, axpy_reduce_kernel, grid_2d(vy.ne0, vy.ne1, threads), threads, partial, n_seg,
               vy);
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
    launch(c, select_kernel, blocks_for(vp.ne1, 1), threads, vp, threshold, vi, vc, c.fault);
    return launch_status();
}

} // namespace pi::gpu
