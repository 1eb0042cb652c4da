#pragma once
// The GPU kernels, one host entry per vtable slot (semantics: pib_backend.h). Each
// validates its arguments on the host, launches on the context's stream and returns without
// waiting. Index values live in device memory, so a bad index is caught by the kernel, which
// skips it and raises the context's fault flag (reported by synchronize).
#include "gpu_context.hpp"

namespace pi::gpu {

// kernels_elementwise.cu
int get_rows(context& c, const pib_tensor* table, const pib_tensor* ids, const pib_tensor* out);
int set_rows(context& c, const pib_tensor* src, const pib_tensor* rows, const pib_tensor* dst);
int add(context& c, const pib_tensor* a, const pib_tensor* b, const pib_tensor* out);
int add_row(context& c, const pib_tensor* x, const pib_tensor* b, const pib_tensor* idx,
            const pib_tensor* count);
int relu(context& c, const pib_tensor* x, const pib_tensor* out);
int glu(context& c, const pib_tensor* gate, const pib_tensor* up, int32_t kind,
        const pib_tensor* out);

// kernels_norm_rope.cu
int rms_norm(context& c, const pib_tensor* x, const pib_tensor* w, float eps, const pib_tensor* y);
int layer_norm(context& c, const pib_tensor* x, const pib_tensor* w, const pib_tensor* b, float eps,
               const pib_tensor* y);
int rope(context& c, const pib_tensor* x, const pib_tensor* pos, const pib_rope_params* p);

// kernels_matmul.cu
int mul_mat(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* y);

// kernels_sparse.cu
int mul_mat_sparse(context& c, const pib_tensor* w, const pib_tensor* x, const pib_tensor* idx,
                   const pib_tensor* count, const pib_tensor* y);
int mul_mat_sparse2(context& c, const pib_tensor* w0, const pib_tensor* w1, const pib_tensor* x,
                    const pib_tensor* idx, const pib_tensor* count, const pib_tensor* y0,
                    const pib_tensor* y1);
int axpy_sparse(context& c, const pib_tensor* wt, const pib_tensor* a, const pib_tensor* idx,
                const pib_tensor* count, const pib_tensor* y);
int select_active(context& c, const pib_tensor* p, float threshold, const pib_tensor* idx,
                  const pib_tensor* count);

// kernels_attention.cu
int attention(context& c, const pib_tensor* q, const pib_tensor* k_cache, const pib_tensor* v_cache,
              const pib_tensor* q_pos, const pib_tensor* kv_pos, const pib_attention_params* p,
              const pib_tensor* out);

// gpu_graph.cu: the graph sessions of version 6, and the graphs' release at teardown.
int graph_begin(context& c);
int graph_end(context& c);
int graph_stats(context& c, pib_graph_stats* out);
void release_graphs(context& c);

} // namespace pi::gpu
