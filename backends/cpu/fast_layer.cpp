// Attention, RMSNorm and the element-wise ops of the fast kernels: rows (or (token, head) pairs)
// split across threads in chunks large enough to amortise a task.
#include "cpu_parallel.hpp"
#include "fast_kernels.hpp"

#include <algorithm>

namespace pi::cpu {

namespace {

// Floats of element-wise work one task handles at least.
constexpr int64_t task_elements = 1 << 15;

int64_t rows_per_task(const context& c, const view& v) {
    return chunk_size(c, v.ne1, std::max<int64_t>(1, task_elements / std::max<int64_t>(1, v.ne0)),
                      v.ne1, 1);
}

// f(row) for every row of `shape`, rows split across threads.
template <class F> void for_rows(context& c, const view& shape, F&& f) {
    parallel_chunks(c, shape.ne1, rows_per_task(c, shape), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
            f(r);
    });
}

} // namespace

int fast_attention(context& c, const view& q, const view& k, const view& v, const view& q_pos,
                   const view& kv_pos, const pib_attention_params& p, const view& out) {
    const simd_kernels& s = *c.simd;
    const int32_t group = p.n_head / p.n_head_kv;
    const std::size_t k_elem = k.is(ggml_type::f16) ? sizeof(uint16_t) : sizeof(float);
    const std::size_t v_elem = v.is(ggml_type::f16) ? sizeof(uint16_t) : sizeof(float);
    // An item: up to attend_heads query heads of one token that share a cache head.
    const int32_t parts = (group + attend_heads - 1) / attend_heads;
    const int32_t per_part = (group + parts - 1) / parts;
    const int64_t items = q.ne1 * p.n_head_kv * parts;
    const int64_t work =
        std::max<int64_t>(1, 2 * static_cast<int64_t>(p.n_kv) * p.head_dim * per_part);
    const int64_t chunk =
        chunk_size(c, items, std::max<int64_t>(1, task_elements / work), items, 1);
    const int32_t* qp = q_pos.row<const int32_t>(0);
    const int32_t* kp = kv_pos.row<const int32_t>(0);
    parallel_chunks(c, items, chunk, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t t = i / (p.n_head_kv * parts), rest = i % (p.n_head_kv * parts);
            const int64_t kv_head = rest / parts, part = rest % parts;
            const int64_t h = kv_head * group + part * per_part;
            const auto n_heads =
                static_cast<int32_t>(std::min<int64_t>(per_part, (kv_head + 1) * group - h));
            const int64_t col = h * p.head_dim;
            const auto kv_col = static_cast<std::size_t>(kv_head * p.head_dim);
            s.attend(attend_args{
                .n_heads = n_heads,
                .q = q.row<const float>(t) + col,
                .k = k.base + kv_col * k_elem,
                .k_stride = k.nb1,
                .k_f16 = k.is(ggml_type::f16),
                .v = v.base + kv_col * v_elem,
                .v_stride = v.nb1,
                .v_f16 = v.is(ggml_type::f16),
                .head_dim = p.head_dim,
                .n_kv = p.n_kv,
                .kv_pos = kp,
                .q_pos = qp[t],
                .scale = p.scale,
                .out = out.row<float>(t) + col,
            });
        }
    });
    return PIB_OK;
}

int fast_rms_norm(context& c, const view& x, const view& w, float eps, const view& y) {
    const simd_kernels& s = *c.simd;
    const float* weight = w.row<const float>(0);
    for_rows(c, x, [&](int64_t r) {
        s.rms_norm(x.row<const float>(r), weight, x.ne0, eps, y.row<float>(r));
    });
    return PIB_OK;
}

int fast_add(context& c, const view& a, const view& b, const view& out) {
    const simd_kernels& s = *c.simd;
    for_rows(c, out, [&](int64_t r) {
        s.add(a.row<const float>(r), b.row<const float>(r), out.row<float>(r), out.ne0);
    });
    return PIB_OK;
}

int fast_relu(context& c, const view& x, const view& out) {
    const simd_kernels& s = *c.simd;
    for_rows(c, out, [&](int64_t r) { s.relu(x.row<const float>(r), out.row<float>(r), out.ne0); });
    return PIB_OK;
}

int fast_glu(context& c, const view& gate, const view& up, int32_t kind, const view& out) {
    const simd_kernels& s = *c.simd;
    for_rows(c, out, [&](int64_t r) {
        s.glu(gate.row<const float>(r), up.row<const float>(r), out.row<float>(r), out.ne0, kind);
    });
    return PIB_OK;
}

} // namespace pi::cpu
