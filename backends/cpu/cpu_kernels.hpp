#pragma once
// The CPU kernels, one declaration per vtable entry (semantics: pib_backend.h). They
// validate every argument before writing anything, then run the fast kernels (fast_kernels.hpp)
// when the context has an instruction-set table and the scalar reference loops otherwise. They
// may throw only std::bad_alloc (the vtable wrapper turns exceptions into status codes).
#include "cpu_context.hpp"
#include "pib_backend.h"

namespace pi::cpu {

// kernels_elementwise.cpp
int get_rows(context& c, const pib_tensor* table, const pib_tensor* ids, const pib_tensor* out);
int set_rows(context& c, const pib_tensor* src, const pib_tensor* rows, const pib_tensor* dst);
int add(context& c, const pib_tensor* a, const pib_tensor* b, const pib_tensor* out);
int add_row(context& c, const pib_tensor* x, const pib_tensor* b, const pib_tensor* idx,
            const pib_tensor* count);
int relu(context& c, const pib_tensor* x, const pib_tensor* out);
int glu(context& c, const pib_tensor* gate, const pib_tensor* up, int32_t kind,
        const pib_tensor* out);

// kernels_matmul.cpp
int mul_mat(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* y);
int mul_mat_sparse(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* idx,
                   const pib_tensor* count, const pib_tensor* y);
int mul_mat_sparse2(context& c, const pib_tensor* w0, const pib_tensor* w1, const pib_tensor* x,
                    const pib_tensor* idx, const pib_tensor* count, const pib_tensor* y0,
                    const pib_tensor* y1);
int axpy_sparse(context& c, const pib_tensor* wt, const pib_tensor* a, const pib_tensor* idx,
                const pib_tensor* count, const pib_tensor* y);
int select_active(context& c, const pib_tensor* p, float threshold, const pib_tensor* idx,
                  const pib_tensor* count);

// kernels_norm_rope.cpp
int rms_norm(context& c, const pib_tensor* x, const pib_tensor* w, float eps, const pib_tensor* y);
int layer_norm(context& c, const pib_tensor* x, const pib_tensor* w, const pib_tensor* b, float eps,
               const pib_tensor* y);
int rope(context& c, const pib_tensor* x, const pib_tensor* pos, const pib_rope_params* p);

// kernels_attention.cpp
int attention(context& c, const pib_tensor* q, const pib_tensor* k_cache, const pib_tensor* v_cache,
              const pib_tensor* q_pos, const pib_tensor* kv_pos, const pib_attention_params* p,
              const pib_tensor* out);

} // namespace pi::cpu
