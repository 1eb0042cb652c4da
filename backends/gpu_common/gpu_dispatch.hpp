#pragma once
// Picks the weight-type traits (gpu_math.hpp) for a tensor view. make_view has checked that rows
// hold whole blocks and start on the type's alignment, so the quantized types have one traits
// struct each; F32 and F16 take the vector variant when every row starts on 16 bytes and holds
// whole units, else the element-wise one.
#include "gpu_context.hpp"

namespace pi::gpu {

template <class V> bool vector_fits(const view& w) {
    return w.rows_aligned(V::align) && w.ne0 % V::unit == 0;
}

// f(traits{}) for the weights of the dot-product kernels (load_unit).
template <class F> int with_weights(const view& w, F&& f) {
    switch (w.type) {
    case type_f32:
        return vector_fits<w_f32x4>(w) ? f(w_f32x4{}) : f(w_f32{});
    case type_f16:
        return vector_fits<w_f16x8>(w) ? f(w_f16x8{}) : f(w_f16{});
    case type_q4_0:
        return f(w_q4_0{});
    case type_q8_0:
        return f(w_q8_0{});
    default:
        return PIB_ERR_UNSUPPORTED;
    }
}

// f(traits{}) for kernels that read single weight elements (gathers, column-sparse, tiles).
template <class F> int with_weight_elements(uint32_t type, F&& f) {
    switch (type) {
    case type_f32:
        return f(w_f32{});
    case type_f16:
        return f(w_f16{});
    case type_q4_0:
        return f(w_q4_0{});
    case type_q8_0:
        return f(w_q8_0{});
    default:
        return PIB_ERR_UNSUPPORTED;
    }
}

// f(traits{}) for the types kernels also store (KV caches, set_rows): F32 and F16.
template <class F> int with_elements(uint32_t type, F&& f) {
    switch (type) {
    case type_f32:
        return f(w_f32{});
    case type_f16:
        return f(w_f16{});
    default:
        return PIB_ERR_UNSUPPORTED;
    }
}

} // namespace pi::gpu
