// Row gathers and scatters (embedding lookup, KV-cache store) and element-wise F32 ops.
#include "gpu_dispatch.hpp"
#include "gpu_kernels.hpp"

namespace pi::gpu {

namespace {

constexpr int threads = 256;

bool f32_same_shape(const view& a, const view& b) {
    return a.is(type_f32) && b.is(type_f32) && a.same_shape(b);
}

template <class T> __global__ void get_rows_kernel(view table, view ids, view out, int* fault) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= out.ne0) return;
    const int32_t* id = ids.row<const int32_t>(0);
    for (int64_t r = blockIdx.y; r < out.ne1; r += gridDim.y) {
        float v = 0.0f;
        if (id[r] >= 0 && id[r] < table.ne1)
            v = T::load(table.row_bytes(id[r]), i);
        else
            *fault = 1;
        out.row<float>(r)[i] = v;
    }
}

// One thread per column walks the tokens in order, so a row named twice keeps the last
// token's values, as on the CPU.
template <class T> __global__ void set_rows_kernel(view src, view rows, view dst, int* fault) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= src.ne0) return;
    const int32_t* row = rows.row<const int32_t>(0);
    for (int64_t t = 0; t < src.ne1; ++t) {
        if (row[t] < 0 || row[t] >= dst.ne1) {
            *fault = 1;
            continue;
        }
        T::store(dst.row_bytes(row[t]), i, src.row<const float>(t)[i]);
    }
}

struct op_add {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct op_relu {
    __device__ float operator()(float a, float) const { return act_relu(a); }
};
struct op_glu {
    int32_t kind;
    __device__ float operator()(float g, float u) const { return act_glu(kind, g, u); }
};

template <class F> __global__ void map2_kernel(view a, view b, view out, F f) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= out.ne0) return;
    for (int64_t r = blockIdx.y; r < out.ne1; r += gridDim.y)
        out.row<float>(r)[i] = f(a.row<const float>(r)[i], b.row<const float>(r)[i]);
}

// One thread per (list slot, token); a slot past the token's count, or an index outside the
// row, does nothing (the device cannot report which without a host round trip).
__global__ void listed_bias_kernel(view x, const float* b, view idx, const int32_t* count) {
    const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (k >= idx.ne0) return;
    for (int64_t t = blockIdx.y; t < x.ne1; t += gridDim.y) {
        if (k >= count[t]) continue;
        const int32_t i = idx.row<const int32_t>(t)[k];
        if (i >= 0 && i < x.ne0) x.row<float>(t)[i] += b[i];
    }
}

template <class F> int map2(context& c, const view& a, const view& b, const view& out, F f) {
    if (out.ne0 == 0 || out.ne1 == 0) return PIB_OK;
    launch(c, map2_kernel<F>, grid_2d(out.ne0, out.ne1, threads), threads, a, b, out, f);
    return launch_status();
}

} // namespace

int get_rows(context& c, const pib_tensor* table, const pib_tensor* ids, const pib_tensor* out) {
    view t, i, o;
    if (const int s = make_views({view_arg{table, &t}, {ids, &i}, {out, &o}}); s != PIB_OK)
        return s;
    if (!i.is(type_i32) || i.ne1 != 1 || !o.is(type_f32) || o.ne0 != t.ne0 || o.ne1 != i.ne0)
        return PIB_ERR_INVALID_ARGUMENT;
    return with_weight_elements(t.type, [&]<class T>(T) {
        if (o.ne0 == 0 || o.ne1 == 0) return static_cast<int>(PIB_OK);
        launch(c, get_rows_kernel<T>, grid_2d(o.ne0, o.ne1, threads), threads, t, i, o, c.fault);
        return launch_status();
    });
}

int set_rows(context& c, const pib_tensor* src, const pib_tensor* rows, const pib_tensor* dst) {
    view s, r, d;
    if (const int st = make_views({view_arg{src, &s}, {rows, &r}, {dst, &d}}); st != PIB_OK)
        return st;
    if (!s.is(type_f32) || !is_i32_vector(r, s.ne1) || d.ne0 != s.ne0)
        return PIB_ERR_INVALID_ARGUMENT;
    return with_elements(d.type, [&]<class T>(T) {
        if (s.ne0 == 0 || s.ne1 == 0) return static_cast<int>(PIB_OK);
        launch(c, set_rows_kernel<T>, blocks_for(s.ne0, threads), threads, s, r, d, c.fault);
        return launch_status();
    });
}

int add(context& c, const pib_tensor* a, const pib_tensor* b, const pib_tensor* out) {
    view va, vb, vo;
    if (const int s = make_views({view_arg{a, &va}, {b, &vb}, {out, &vo}}); s != PIB_OK) return s;
    if (!f32_same_shape(va, vb) || !f32_same_shape(va, vo)) return PIB_ERR_INVALID_ARGUMENT;
    return map2(c, va, vb, vo, op_add{});
}

int add_row(context& c, const pib_tensor* x, const pib_tensor* b, const pib_tensor* idx,
            const pib_tensor* count) {
    view vx, vb, vi, vc;
    if (const int s = make_views({view_arg{x, &vx}, {b, &vb}}); s != PIB_OK) return s;
    if (!vx.is(type_f32) || !vb.is(type_f32) || vb.ne0 != vx.ne0 || vb.ne1 != 1 ||
        (idx == nullptr) != (count == nullptr))
        return PIB_ERR_INVALID_ARGUMENT;
    if (idx == nullptr) {
        view row_b = vb; // the bias row read again for every row of x
        row_b.ne1 = vx.ne1;
        row_b.nb1 = 0;
        return map2(c, vx, row_b, vx, op_add{});
    }
    if (const int s = make_views({view_arg{idx, &vi}, {count, &vc}}); s != PIB_OK) return s;
    if (!vi.is(type_i32) || vi.ne1 != vx.ne1 || !vc.is(type_i32) || vc.ne0 != vx.ne1 || vc.ne1 != 1)
        return PIB_ERR_INVALID_ARGUMENT;
    if (vx.ne1 == 0 || vi.ne0 == 0) return PIB_OK;
    launch(c, listed_bias_kernel, grid_2d(vi.ne0, vx.ne1, threads), threads, vx,
           vb.row<const float>(0), vi, vc.row<const int32_t>(0));
    return launch_status();
}

int relu(context& c, const pib_tensor* x, const pib_tensor* out) {
    view vx, vo;
    if (const int s = make_views({view_arg{x, &vx}, {out, &vo}}); s != PIB_OK) return s;
    if (!f32_same_shape(vx, vo)) return PIB_ERR_INVALID_ARGUMENT;
    return map2(c, vx, vx, vo, op_relu{});
}

int glu(context& c, const pib_tensor* gate, const pib_tensor* up, int32_t kind,
        const pib_tensor* out) {
    view vg, vu, vo;
    if (const int s = make_views({view_arg{gate, &vg}, {up, &vu}, {out, &vo}}); s != PIB_OK)
        return s;
    if (!f32_same_shape(vg, vu) || !f32_same_shape(vg, vo)) return PIB_ERR_INVALID_ARGUMENT;
    if (kind != PIB_GLU_RELU && kind != PIB_GLU_SILU && kind != PIB_GLU_RELU_RELU)
        return PIB_ERR_INVALID_ARGUMENT;
    return map2(c, vg, vu, vo, op_glu{kind});
}

} // namespace pi::gpu
