// Row gathers and scatters (embedding lookup, KV-cache store) and element-wise F32 ops.
#include "cpu_kernels.hpp"
#include "cpu_parallel.hpp"
#include "cpu_tensor.hpp"
#include "fast_kernels.hpp"
#include "weight_rows.hpp"

#include <cmath>

namespace pi::cpu {

namespace {

constexpr int64_t elementwise_grain = 4096;

// Every id in ids (I32, one row) lies in [0, limit).
bool ids_in_range(const view& ids, int64_t limit) {
    const int32_t* p = ids.row<const int32_t>(0);
    for (int64_t i = 0; i < ids.ne0; ++i)
        if (p[i] < 0 || p[i] >= limit) return false;
    return true;
}

// f(a, b) element by element over F32 tensors of equal shape; out may alias a or b.
template <class F> void map2(context& c, const view& a, const view& b, const view& out, F f) {
    parallel_2d(c, out.ne1, out.ne0, elementwise_grain, [&](int64_t r, int64_t c0, int64_t c1) {
        const float* pa = a.row<const float>(r);
        const float* pb = b.row<const float>(r);
        float* po = out.row<float>(r);
        for (int64_t i = c0; i < c1; ++i)
            po[i] = f(pa[i], pb[i]);
    });
}

bool f32_same_shape(const view& a, const view& b) {
    return a.is(ggml_type::f32) && b.is(ggml_type::f32) && a.same_shape(b);
}

float relu1(float v) {
    return v > 0.0f ? v : 0.0f;
}

float silu1(float v) {
    return static_cast<float>(v / (1.0 + std::exp(-static_cast<double>(v))));
}

} // namespace

int get_rows(context& c, const pib_tensor* table, const pib_tensor* ids, const pib_tensor* out) {
    view t, i, o;
    if (const int s = make_views({{table, &t}, {ids, &i}, {out, &o}}); s != PIB_OK) return s;
    if (!i.is(ggml_type::i32) || i.ne1 != 1 || !o.is(ggml_type::f32) || o.ne0 != t.ne0 ||
        o.ne1 != i.ne0 || !ids_in_range(i, t.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    return with_weight_rows(t, [&](const auto& rows) {
        const int32_t* id = i.row<const int32_t>(0);
        parallel_2d(c, o.ne1, o.ne0, elementwise_grain, [&](int64_t r, int64_t c0, int64_t c1) {
            rows.read(id[r], c0, c1, o.row<float>(r) + c0);
        });
        return PIB_OK;
    });
}

int set_rows(context& c, const pib_tensor* src, const pib_tensor* rows, const pib_tensor* dst) {
    view s, r, d;
    if (const int st = make_views({{src, &s}, {rows, &r}, {dst, &d}}); st != PIB_OK) return st;
    if (!s.is(ggml_type::f32) || !is_i32_vector(r, s.ne1) || d.ne0 != s.ne0 ||
        !ids_in_range(r, d.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    return with_float_type(d.type, [&]<class T>(const T*) {
        const int32_t* row = r.row<const int32_t>(0);
        // Columns in parallel, tokens in order: a row named twice deterministically keeps the
        // last token's values, and no two tasks write the same element.
        parallel_1d(c, s.ne0, elementwise_grain, [&](int64_t c0, int64_t c1) {
            for (int64_t t = 0; t < s.ne1; ++t) {
                const float* from = s.row<const float>(t);
                T* to = d.row<T>(row[t]);
                for (int64_t k = c0; k < c1; ++k)
                    store(to, k, from[k]);
            }
        });
        return PIB_OK;
    });
}

int add(context& c, const pib_tensor* a, const pib_tensor* b, const pib_tensor* out) {
    view va, vb, vo;
    if (const int s = make_views({{a, &va}, {b, &vb}, {out, &vo}}); s != PIB_OK) return s;
    if (!f32_same_shape(va, vb) || !f32_same_shape(va, vo)) return PIB_ERR_INVALID_ARGUMENT;
    if (c.simd != nullptr && c.simd->add != nullptr) return fast_add(c, va, vb, vo);
    map2(c, va, vb, vo, [](float x, float y) { return x + y; });
    return PIB_OK;
}

int add_row(context& c, const pib_tensor* x, const pib_tensor* b, const pib_tensor* idx,
            const pib_tensor* count) {
    view vx, vb, vi, vc;
    if (const int s = make_views({{x, &vx}, {b, &vb}}); s != PIB_OK) return s;
    if (!vx.is(ggml_type::f32) || !vb.is(ggml_type::f32) || vb.ne0 != vx.ne0 || vb.ne1 != 1 ||
        (idx == nullptr) != (count == nullptr))
        return PIB_ERR_INVALID_ARGUMENT;
    const float* bias = vb.row<const float>(0);
    if (idx == nullptr) {
        parallel_2d(c, vx.ne1, vx.ne0, elementwise_grain, [&](int64_t r, int64_t c0, int64_t c1) {
            float* row = vx.row<float>(r);
            for (int64_t i = c0; i < c1; ++i)
                row[i] += bias[i];
        });
        return PIB_OK;
    }
    if (const int s = make_views({{idx, &vi}, {count, &vc}}); s != PIB_OK) return s;
    if (!vi.is(ggml_type::i32) || vi.ne1 != vx.ne1 || !is_i32_vector(vc, vx.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    const int32_t* counts = vc.row<const int32_t>(0);
    for (int64_t t = 0; t < vx.ne1; ++t) {
        if (counts[t] < 0 || counts[t] > vi.ne0) return PIB_ERR_INVALID_ARGUMENT;
        const int32_t* list = vi.row<const int32_t>(t);
        for (int32_t k = 0; k < counts[t]; ++k)
            if (list[k] < 0 || list[k] >= vx.ne0) return PIB_ERR_INVALID_ARGUMENT;
    }
    parallel_1d(c, vx.ne1, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float* row = vx.row<float>(t);
            const int32_t* list = vi.row<const int32_t>(t);
            for (int32_t k = 0; k < counts[t]; ++k)
                row[list[k]] += bias[list[k]];
        }
    });
    return PIB_OK;
}

int relu(context& c, const pib_tensor* x, const pib_tensor* out) {
    view vx, vo;
    if (const int s = make_views({{x, &vx}, {out, &vo}}); s != PIB_OK) return s;
    if (!f32_same_shape(vx, vo)) return PIB_ERR_INVALID_ARGUMENT;
    if (c.simd != nullptr && c.simd->relu != nullptr) return fast_relu(c, vx, vo);
    map2(c, vx, vx, vo, [](float v, float) { return relu1(v); });
    return PIB_OK;
}

int glu(context& c, const pib_tensor* gate, const pib_tensor* up, int32_t kind,
        const pib_tensor* out) {
    view vg, vu, vo;
    if (const int s = make_views({{gate, &vg}, {up, &vu}, {out, &vo}}); s != PIB_OK) return s;
    if (!f32_same_shape(vg, vu) || !f32_same_shape(vg, vo)) return PIB_ERR_INVALID_ARGUMENT;
    const bool known = kind == PIB_GLU_RELU || kind == PIB_GLU_SILU || kind == PIB_GLU_RELU_RELU;
    if (c.simd != nullptr && c.simd->glu != nullptr && known) return fast_glu(c, vg, vu, kind, vo);
    switch (kind) {
    case PIB_GLU_RELU:
        map2(c, vg, vu, vo, [](float g, float u) { return relu1(g) * u; });
        return PIB_OK;
    case PIB_GLU_SILU:
        map2(c, vg, vu, vo, [](float g, float u) { return silu1(g) * u; });
        return PIB_OK;
    case PIB_GLU_RELU_RELU:
        map2(c, vg, vu, vo, [](float g, float u) { return relu1(g) * relu1(u); });
        return PIB_OK;
    default:
        return PIB_ERR_INVALID_ARGUMENT;
    }
}

} // namespace pi::cpu
