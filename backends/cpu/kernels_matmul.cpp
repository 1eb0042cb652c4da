// Dense and sparse matrix products and the active-neuron selection of the sparse FFN.
#include "cpu_kernels.hpp"
#include "cpu_parallel.hpp"
#include "cpu_tensor.hpp"
#include "fast_kernels.hpp"
#include "pib_tensor_extent.h"
#include "weight_rows.hpp"

#include <array>
#include <cstdint>
#include <limits>

namespace pi::cpu {

namespace {

constexpr int64_t invalid_list = std::numeric_limits<int64_t>::max();

// Output columns one axpy task accumulates at once (a stack array, no heap scratch).
constexpr int64_t axpy_block = 256;

// Shapes shared by the sparse kernels: per-token index lists idx (I32 [>= max count][n_tok])
// with their lengths count (I32 [n_tok]).
bool lists_shaped(const view& idx, const view& count, int64_t n_tok) {
    return idx.is(ggml_type::i32) && idx.ne1 == n_tok && is_i32_vector(count, n_tok);
}

// The longest list, or invalid_list when a count is negative or above idx's capacity or an
// index falls outside [0, limit).
int64_t max_count(context& c, const view& idx, const view& count, int64_t limit) {
    const int32_t* n = count.row<const int32_t>(0);
    return parallel_max(c, count.ne0, 0, [&](int64_t t) {
        if (n[t] < 0 || n[t] > idx.ne0) return invalid_list;
        const int32_t* list = idx.row<const int32_t>(t);
        for (int32_t k = 0; k < n[t]; ++k)
            if (list[k] < 0 || list[k] >= limit) return invalid_list;
        return static_cast<int64_t>(n[t]);
    });
}

// Whether two F32 views share a byte (as addresses: they may lie in different buffers).
bool overlap(const view& a, const view& b) {
    return pib_f32_views_overlap(a.base, a.ne0, a.ne1, a.nb1, b.base, b.ne0, b.ne1, b.nb1) != 0;
}

// x and y fit a product with w: x F32 [cols][n_tok], y F32 [rows][n_tok].
bool product_shaped(const view& w, const view& x, const view& y) {
    return x.is(ggml_type::f32) && y.is(ggml_type::f32) && x.ne0 == w.ne0 && y.ne0 == w.ne1 &&
           y.ne1 == x.ne1;
}

// Whether the fast kernels run this product: the context has them and they take w's type.
bool fast(const context& c, const view& w) {
    return c.simd != nullptr && fast_weight_type(*c.simd, w.type);
}

} // namespace

int mul_mat(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* y) {
    view vw, vx, vy;
    if (const int s = make_views({{w, &vw}, {x, &vx}, {y, &vy}}); s != PIB_OK) return s;
    if (!product_shaped(vw, vx, vy)) return PIB_ERR_INVALID_ARGUMENT;
    return with_weight_rows(vw, [&](const auto& rows) -> int {
        if (fast(c, vw)) return fast_mul_mat(c, vw, vx, vy);
        // Rows of w in parallel; each task reuses its rows for every token.
        parallel_1d(c, vw.ne1, grain_for(vw.ne0 * vx.ne1), [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t t = 0; t < vx.ne1; ++t)
                    vy.row<float>(t)[r] = static_cast<float>(rows.dot(r, vx.row<const float>(t)));
        });
        return PIB_OK;
    });
}

namespace {

// The checks of a row-sparse product of w, before anything is written: PIB_OK with the longest
// list in `longest`, or the status to return.
int check_sparse(context& c, const view& w, const view& x, const view& idx, const view& count,
                 const view& y, int64_t& longest) {
    if (!product_shaped(w, x, y) || !lists_shaped(idx, count, x.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    if (const int s = with_weight_rows(w, [](const auto&) { return PIB_OK; }); s != PIB_OK)
        return s;
    longest = max_count(c, idx, count, w.ne1);
    return longest == invalid_list ? PIB_ERR_INVALID_ARGUMENT : PIB_OK;
}

// A checked row-sparse product.
int sparse_product(context& c, const view& vw, const view& vx, const view& vi, const view& vc,
                   const view& vy, int64_t longest) {
    if (fast(c, vw)) return fast_mul_mat_sparse(c, {&vw, 1}, vx, vi, vc, {&vy, 1});
    return with_weight_rows(vw, [&](const auto& rows) {
        parallel_2d(c, vy.ne1, vy.ne0, 4096, [&](int64_t t, int64_t c0, int64_t c1) {
            float* out = vy.row<float>(t);
            for (int64_t r = c0; r < c1; ++r)
                out[r] = 0.0f;
        });
        // (token, list position) pairs in parallel; positions past a token's count are skipped.
        // Lists come from select_active (ascending, no repeats); a repeated row would be written
        // twice with the same value.
        const int32_t* n = vc.row<const int32_t>(0);
        parallel_2d(c, vx.ne1, longest, grain_for(vw.ne0), [&](int64_t t, int64_t k0, int64_t k1) {
            const int32_t* list = vi.row<const int32_t>(t);
            const float* xt = vx.row<const float>(t);
            float* out = vy.row<float>(t);
            for (int64_t k = k0; k < k1 && k < n[t]; ++k)
                out[list[k]] = static_cast<float>(rows.dot(list[k], xt));
        });
        return static_cast<int>(PIB_OK);
    });
}

} // namespace

int mul_mat_sparse(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* idx,
                   const pib_tensor* count, const pib_tensor* y) {
    view vw, vx, vi, vc, vy;
    if (const int s = make_views({{w, &vw}, {x, &vx}, {idx, &vi}, {count, &vc}, {y, &vy}});
        s != PIB_OK)
        return s;
    int64_t longest = 0;
    if (const int s = check_sparse(c, vw, vx, vi, vc, vy, longest); s != PIB_OK) return s;
    return sparse_product(c, vw, vx, vi, vc, vy, longest);
}

int mul_mat_sparse2(context& c, const pib_tensor* w0, const pib_tensor* w1, const pib_tensor* x,
                    const pib_tensor* idx, const pib_tensor* count, const pib_tensor* y0,
                    const pib_tensor* y1) {
    view vw[2], vx, vi, vc, vy[2];
    if (const int s = make_views({{w0, &vw[0]},
                                  {w1, &vw[1]},
                                  {x, &vx},
                                  {idx, &vi},
                                  {count, &vc},
                                  {y0, &vy[0]},
                                  {y1, &vy[1]}});
        s != PIB_OK)
        return s;
    if (!vw[0].same_shape(vw[1]) || overlap(vy[0], vy[1])) return PIB_ERR_INVALID_ARGUMENT;
    int64_t longest = 0;
    for (int m = 0; m < 2; ++m)
        if (const int s = check_sparse(c, vw[m], vx, vi, vc, vy[m], longest); s != PIB_OK) return s;
    // Jointly where both matrices have one type: the fast kernels then prepare x and regroup the
    // lists once, and the rows of a quantized pair share each token's activations as they are
    // read. Otherwise one after the other.
    if (!fast(c, vw[0]) || vw[0].type != vw[1].type) {
        if (const int s = sparse_product(c, vw[0], vx, vi, vc, vy[0], longest); s != PIB_OK)
            return s;
        return sparse_product(c, vw[1], vx, vi, vc, vy[1], longest);
    }
    return fast_mul_mat_sparse(c, vw, vx, vi, vc, vy);
}

int axpy_sparse(context& c, const pib_tensor* wt, const pib_tensor* a, const pib_tensor* idx,
                const pib_tensor* count, const pib_tensor* y) {
    view vw, va, vi, vc, vy;
    if (const int s = make_views({{wt, &vw}, {a, &va}, {idx, &vi}, {count, &vc}, {y, &vy}});
        s != PIB_OK)
        return s;
    if (!va.is(ggml_type::f32) || !vy.is(ggml_type::f32) || va.ne0 != vw.ne1 || vy.ne0 != vw.ne0 ||
        vy.ne1 != va.ne1 || !lists_shaped(vi, vc, va.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    return with_weight_rows(vw, [&](const auto& rows) {
        if (max_count(c, vi, vc, vw.ne1) == invalid_list)
            return static_cast<int>(PIB_ERR_INVALID_ARGUMENT);
        if (fast(c, vw)) return fast_axpy_sparse(c, vw, va, vi, vc, vy);
        const int32_t* n = vc.row<const int32_t>(0);
        // Each task owns a block of output columns of one token and walks that token's list in
        // order, so every y element is summed by one thread in a fixed order.
        parallel_2d(c, va.ne1, vy.ne0, axpy_block, [&](int64_t t, int64_t c0, int64_t c1) {
            const int32_t* list = vi.row<const int32_t>(t);
            const float* at = va.row<const float>(t);
            float* out = vy.row<float>(t);
            for (int64_t b0 = c0; b0 < c1; b0 += axpy_block) {
                const int64_t b1 = b0 + axpy_block < c1 ? b0 + axpy_block : c1;
                std::array<double, axpy_block> acc{};
                for (int32_t k = 0; k < n[t]; ++k) {
                    const float coef = at[list[k]];
                    if (coef == 0.0f) continue;
                    rows.axpy(list[k], coef, b0, b1, acc.data());
                }
                for (int64_t j = b0; j < b1; ++j)
                    out[j] = static_cast<float>(out[j] + acc[j - b0]);
            }
        });
        return static_cast<int>(PIB_OK);
    });
}

int select_active(context& c, const pib_tensor* p, float threshold, const pib_tensor* idx,
                  const pib_tensor* count) {
    view vp, vi, vc;
    if (const int s = make_views({{p, &vp}, {idx, &vi}, {count, &vc}}); s != PIB_OK) return s;
    if (!vp.is(ggml_type::f32) || !lists_shaped(vi, vc, vp.ne1) ||
        vp.ne0 > std::numeric_limits<int32_t>::max())
        return PIB_ERR_INVALID_ARGUMENT;
    if (c.simd != nullptr && c.simd->select != nullptr)
        return fast_select_active(c, vp, threshold, vi, vc);
    auto active = [&](int64_t t) {
        const float* pt = vp.row<const float>(t);
        int64_t k = 0;
        for (int64_t i = 0; i < vp.ne0; ++i)
            k += pt[i] >= threshold ? 1 : 0;
        return k;
    };
    // Count first so that a list longer than idx's capacity fails before anything is written.
    if (parallel_max(c, vp.ne1, 0, active) > vi.ne0) return PIB_ERR_INVALID_ARGUMENT;
    parallel_1d(c, vp.ne1, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const float* pt = vp.row<const float>(t);
            int32_t* list = vi.row<int32_t>(t);
            int32_t k = 0;
            for (int64_t i = 0; i < vp.ne0; ++i)
                if (pt[i] >= threshold) list[k++] = static_cast<int32_t>(i);
            vc.row<int32_t>(0)[t] = k;
        }
    });
    return PIB_OK;
}

} // namespace pi::cpu
