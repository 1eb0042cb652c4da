#pragma once
// Checked access to pib_tensor views for the CPU kernels: every kernel turns its arguments into
// `view`s first, so a bad shape, stride, offset or type is an error code and never a wild read.
#include "pib_backend.h"
#include "quant/types.hpp"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

namespace pi::cpu {

struct view {
    std::byte* base = nullptr; // row 0
    int64_t ne0 = 0;
    int64_t ne1 = 0;
    std::size_t nb1 = 0;
    uint32_t type = 0;

    template <class T> T* row(int64_t r) const {
        return reinterpret_cast<T*>(base + static_cast<std::size_t>(r) * nb1);
    }
    bool is(ggml_type t) const { return type == static_cast<uint32_t>(t); }
    bool same_shape(const view& o) const { return ne0 == o.ne0 && ne1 == o.ne1; }
};

// Validates t (non-null, known type, ne0 a multiple of the block size, nb1 covering a row when
// there is more than one row, rows inside the buffer, rows aligned for the element type) and
// fills v. PIB_OK or PIB_ERR_INVALID_ARGUMENT.
int make_view(const pib_tensor* t, view& v) noexcept;

// make_view for several tensors; the first error wins.
int make_views(std::initializer_list<std::pair<const pib_tensor*, view*>> list) noexcept;

// An I32 vector of exactly n elements (ne0 == n, one row).
inline bool is_i32_vector(const view& v, int64_t n) {
    return v.is(ggml_type::i32) && v.ne0 == n && v.ne1 == 1;
}

// Activations, caches and weights the reference kernels read element by element.
inline float load(const float* p, int64_t i) {
    return p[i];
}
inline float load(const uint16_t* p, int64_t i) {
    return fp16_to_fp32(p[i]);
}
inline void store(float* p, int64_t i, float v) {
    p[i] = v;
}
inline void store(uint16_t* p, int64_t i, float v) {
    p[i] = fp32_to_fp16(v);
}

// Calls f with a null pointer of the element type of `type` (float or uint16_t for F16), or
// returns PIB_ERR_UNSUPPORTED for every other type.
template <class F> int with_float_type(uint32_t type, F&& f) {
    switch (static_cast<ggml_type>(type)) {
    case ggml_type::f32:
        return f(static_cast<const float*>(nullptr));
    case ggml_type::f16:
        return f(static_cast<const uint16_t*>(nullptr));
    default:
        return PIB_ERR_UNSUPPORTED;
    }
}

// Dot product of n elements, accumulated in double: the reference kernels are the oracle for
// the optimized ones, so they trade speed for the smallest rounding error.
template <class W> double dot(const W* w, const float* x, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
        sum += static_cast<double>(load(w, i)) * x[i];
    return sum;
}

// Parallel-loop grain: enough items per task that each carries about `target` units of work.
inline int64_t grain_for(int64_t work_per_item, int64_t target = 1 << 15) {
    if (work_per_item <= 0) return target;
    const int64_t g = target / work_per_item;
    return g < 1 ? 1 : g;
}

} // namespace pi::cpu
