/* The backend vtable: a C struct of function pointers plus a context pointer, so that a
 * backend can live in its own shared object (loaded with dlopen) and the engine can call every
 * kernel through one door. A backend includes only this folder and lib/quant (docs/backends.md).
 *
 * Conventions
 * - Every function returns a pib_status (0 ok, negative error) unless noted.
 * - Tensors are 2-D views into a backend buffer: ne0 elements per row, ne1 rows, nb1 bytes
 *   between rows. Activations are F32 rows (one row per token); weights are any type the
 *   backend lists as supported for the op; index lists are I32.
 * - Kernels may run asynchronously; `synchronize` waits for everything submitted so far.
 * - Kernels never allocate on the hot path and never abort: a bad argument returns an error.
 * - Calls on one context come from one thread at a time, except the transfer calls of version
 *   5 (transfer_upload, transfer_download, transfer_wait), which one thread may make while
 *   another submits kernels or waits in synchronize.
 */
#ifndef PIB_BACKEND_H
#define PIB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PIB_API_VERSION 6

typedef enum pib_status {
    PIB_OK = 0,
    PIB_ERR_INVALID_ARGUMENT = -1,
    PIB_ERR_UNSUPPORTED = -4,
    PIB_ERR_OUT_OF_MEMORY = -5,
    PIB_ERR_DEVICE = -7,
} pib_status;

typedef struct pib_buffer pib_buffer; /* defined by each backend */

typedef struct pib_tensor {
    uint32_t type;      /* ggml type id (lib/quant/types.hpp) */
    int64_t ne0;        /* elements per row */
    int64_t ne1;        /* rows */
    size_t nb1;         /* bytes between consecutive rows */
    pib_buffer *buffer; /* owning buffer */
    size_t offset;      /* byte offset of row 0 inside the buffer */
} pib_tensor;

typedef enum pib_glu_kind {
    PIB_GLU_RELU = 0,      /* out = relu(gate) * up          (ReGLU: ReLU-Llama, ProSparse) */
    PIB_GLU_SILU = 1,      /* out = silu(gate) * up          (SwiGLU: plain Llama) */
    PIB_GLU_RELU_RELU = 2, /* out = relu(gate) * relu(up)    (Bamboo) */
} pib_glu_kind;

typedef enum pib_rope_mode {
    PIB_ROPE_NORMAL = 0, /* rotate adjacent pairs (x[2j], x[2j+1]) */
    PIB_ROPE_NEOX = 2,   /* rotate (x[j], x[j + n_rot/2]) */
} pib_rope_mode;

typedef struct pib_rope_params {
    int32_t n_head;    /* heads in each row */
    int32_t head_dim;  /* elements per head */
    int32_t n_rot;     /* rotated elements per head (<= head_dim) */
    int32_t mode;      /* pib_rope_mode */
    float freq_base;   /* theta_j = pos * freq_base^(-2j/n_rot) * freq_scale */
    float freq_scale;
} pib_rope_params;

typedef struct pib_attention_params {
    int32_t n_head;    /* query heads */
    int32_t n_head_kv; /* key/value heads; query head h uses kv head h / (n_head / n_head_kv) */
    int32_t head_dim;
    int32_t n_kv;      /* cache rows to attend over (rows 0 .. n_kv-1) */
    float scale;       /* usually 1/sqrt(head_dim) */
} pib_attention_params;

typedef struct pib_device_info {
    const char *name;     /* e.g. "cpu", "NVIDIA GeForce RTX 4090" */
    const char *kind;     /* "cpu", "cuda", "hip" */
    size_t memory_total;  /* bytes */
    size_t memory_free;   /* bytes */
    int32_t host_visible; /* 1 when buffers are plain host memory (pointers usable in place) */
    /* Bit PIB_TYPE_BIT(t) set: ggml type t is accepted as weights by mul_mat, mul_mat_sparse,
     * mul_mat_sparse2, axpy_sparse and get_rows. */
    uint64_t weight_types;
} pib_device_info;

#define PIB_TYPE_BIT(type) (UINT64_C(1) << (type))

/* Version 6: what the kernels of graph sessions cost to submit, counted since the backend was
 * created. */
typedef struct pib_graph_stats {
    uint64_t kernels;         /* kernels recorded */
    uint64_t launches;        /* submissions: graph launches plus kernels launched one by one */
    uint64_t graphs_replayed; /* runs equal to the last at their place: launched as they were */
    uint64_t graphs_updated;  /* runs captured again and the graph's arguments updated */
    uint64_t graphs_created;  /* runs captured into a new graph */
} pib_graph_stats;

typedef struct pib_vtable {
    uint32_t api_version; /* PIB_API_VERSION */
    void (*destroy)(void *ctx);
    int (*device_info)(void *ctx, pib_device_info *out);
    int (*set_n_threads)(void *ctx, int32_t n_threads);

    /* ---- buffers ---- */
    int (*buffer_alloc)(void *ctx, size_t size, pib_buffer **out);
    /* Wrap host memory without copying; PIB_ERR_UNSUPPORTED on backends that cannot read host
     * memory in place. The memory must outlive the buffer. */
    int (*buffer_from_host)(void *ctx, void *ptr, size_t size, pib_buffer **out);
    void (*buffer_free)(void *ctx, pib_buffer *buf); /* accepts NULL */
    size_t (*buffer_size)(void *ctx, const pib_buffer *buf);
    void *(*buffer_host_ptr)(void *ctx, pib_buffer *buf); /* NULL if not host-visible */
    int (*buffer_upload)(void *ctx, pib_buffer *buf, size_t offset, const void *src, size_t n);
    int (*buffer_download)(void *ctx, const pib_buffer *buf, size_t offset, void *dst, size_t n);
    int (*buffer_clear)(void *ctx, pib_buffer *buf, size_t offset, size_t n); /* zero bytes */

    int (*synchronize)(void *ctx);

    /* ---- kernels ---- */
    /* out[t][i] = table[ids[t]][i] converted to F32. ids: I32 [n] (1 row); out: F32 [ne0][n]. */
    int (*get_rows)(void *ctx, const pib_tensor *table, const pib_tensor *ids, const pib_tensor *out);
    /* dst[rows[t]] = src[t] converted to dst's type (F32 or F16). rows: I32 [n]. */
    int (*set_rows)(void *ctx, const pib_tensor *src, const pib_tensor *rows, const pib_tensor *dst);
    /* y[t][r] = sum_c w[r][c] * x[t][c]; w: [cols][rows], x: F32 [cols][n_tok], y: F32 [rows][n_tok]. */
    int (*mul_mat)(void *ctx, const pib_tensor *w, const pib_tensor *x, const pib_tensor *y);
    /* Row-sparse mat-mul: for token t, rows idx[t][0 .. count[t]-1] of y[t] get w_row . x[t];
     * every other element of y[t] is set to 0. idx: I32 [>= max count][n_tok]; count: I32 [n_tok]. */
    int (*mul_mat_sparse)(void *ctx, const pib_tensor *w, const pib_tensor *x, const pib_tensor *idx,
                          const pib_tensor *count, const pib_tensor *y);
    /* Two row-sparse mat-muls sharing x and the lists, as an FFN's up and gate: y0 as
     * mul_mat_sparse(w0, x, idx, count, y0) and y1 as mul_mat_sparse(w1, x, idx, count, y1),
     * w0 and w1 of one shape, y0 and y1 overlapping neither each other nor an input. Optional: NULL where a backend has no
     * joint form; callers then call mul_mat_sparse twice (pi::device::mul_mat_sparse2 does). */
    int (*mul_mat_sparse2)(void *ctx, const pib_tensor *w0, const pib_tensor *w1,
                           const pib_tensor *x, const pib_tensor *idx, const pib_tensor *count,
                           const pib_tensor *y0, const pib_tensor *y1);
    /* Column-sparse accumulate over a transposed matrix: y[t] += sum a[t][i] * wt_row_i over
     * i in idx[t][0 .. count[t]-1] with a[t][i] != 0. wt: [n_out][n_ff], a: F32 [n_ff][n_tok],
     * y: F32 [n_out][n_tok]. */
    int (*axpy_sparse)(void *ctx, const pib_tensor *wt, const pib_tensor *a, const pib_tensor *idx,
                       const pib_tensor *count, const pib_tensor *y);
    /* Active-neuron lists: idx[t] = ascending i with p[t][i] >= threshold, count[t] = their number. */
    int (*select_active)(void *ctx, const pib_tensor *p, float threshold, const pib_tensor *idx,
                         const pib_tensor *count);
    /* y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w; w: F32 [ne0][1]. y may alias x. */
    int (*rms_norm)(void *ctx, const pib_tensor *x, const pib_tensor *w, float eps, const pib_tensor *y);
    /* In-place rotary embedding of each head of each row; pos: I32 [n_tok]. */
    int (*rope)(void *ctx, const pib_tensor *x, const pib_tensor *pos, const pib_rope_params *p);
    /* Causal attention over a cache holding one row per position: for token t, cache row j is
     * visible iff kv_pos[j] >= 0 and kv_pos[j] <= q_pos[t]. q, out: F32 [n_head*head_dim][n_tok];
     * k_cache, v_cache: F32 or F16 [n_head_kv*head_dim][>= n_kv]; q_pos: I32 [n_tok];
     * kv_pos: I32 [>= n_kv]. */
    int (*attention)(void *ctx, const pib_tensor *q, const pib_tensor *k_cache,
                     const pib_tensor *v_cache, const pib_tensor *q_pos, const pib_tensor *kv_pos,
                     const pib_attention_params *p, const pib_tensor *out);
    /* Element-wise on F32 tensors of equal shape; out may alias an input. */
    int (*add)(void *ctx, const pib_tensor *a, const pib_tensor *b, const pib_tensor *out);
    int (*relu)(void *ctx, const pib_tensor *x, const pib_tensor *out);
    int (*glu)(void *ctx, const pib_tensor *gate, const pib_tensor *up, int32_t kind,
               const pib_tensor *out);
    /* Version 4, for the LayerNorm families (falcon, opt). Optional: NULL where a backend lacks
     * them; the engine then keeps those layers off that device.
     * y[t] = (x[t] - mean(x[t])) / sqrt(var(x[t]) + eps) * w + b, biased variance; w, b: F32
     * [ne0][1], b may be NULL (no bias). y may alias x. */
    int (*layer_norm)(void *ctx, const pib_tensor *x, const pib_tensor *w, const pib_tensor *b,
                      float eps, const pib_tensor *y);
    /* A bias: x[t][i] += b[i] for every row t of x; x: F32, b: F32 [ne0][1]. With lists (idx,
     * count as for mul_mat_sparse; both NULL or neither), only the listed i of each row. */
    int (*add_row)(void *ctx, const pib_tensor *x, const pib_tensor *b, const pib_tensor *idx,
                   const pib_tensor *count);

    /* ---- version 5: copies beside the kernels, page-locked host memory ----
     * Optional: NULL where a backend has none (the CPU), all five transfer entries or none. The
     * engine then copies with buffer_upload / buffer_download and allocates host memory itself
     * (docs/hybrid.md). */
    /* Host memory the device copies to and from at full speed (cudaHostAlloc; a plain
     * allocation where that means nothing), at least 64-byte aligned, freed by host_free. */
    int (*host_alloc)(void *ctx, size_t size, void **out);
    void (*host_free)(void *ctx, void *ptr); /* accepts NULL */
    /* Copies on the backend's transfer stream, in the order submitted, beside the kernels: they
     * return at once, and `src` / `dst` must stay valid and unchanged until transfer_wait
     * returns. A transfer is ordered against kernels only by the two calls below. A kernel's
     * fault is reported by the next synchronize or buffer_download, not here. */
    int (*transfer_upload)(void *ctx, pib_buffer *buf, size_t offset, const void *src, size_t n);
    int (*transfer_download)(void *ctx, const pib_buffer *buf, size_t offset, void *dst,
                             size_t n);
    /* Transfers submitted after this start once every kernel submitted before it has finished. */
    int (*transfer_after_kernels)(void *ctx);
    /* Kernels submitted after this start once every transfer submitted before it is complete. */
    int (*kernels_after_transfers)(void *ctx);
    /* The host waits for every transfer submitted so far. */
    int (*transfer_wait)(void *ctx);

    /* ---- version 6: a batch's kernels submitted as graphs ----
     * Optional: NULL where a backend has no cost per launch to save (the CPU), all three or
     * none. After graph_begin, the kernels are recorded rather than launched; buffer_upload,
     * buffer_download, buffer_clear, synchronize, transfer_after_kernels, kernels_after_transfers
     * and graph_end first submit the kernels recorded since the last submission, and a buffer a
     * recorded kernel uses is not freed before then. The backend submits such a run as a graph:
     * the graph of the same place of the previous session when the run's kernels and arguments
     * are the same, else that graph updated, else a new one. Results are those of launching each
     * kernel when it was called; a kernel's bad arguments are returned by its call, an error of
     * submitting by the call that submits, a device fault by the next synchronize. A session
     * already begun refuses graph_begin (PIB_ERR_INVALID_ARGUMENT). */
    int (*graph_begin)(void *ctx);
    int (*graph_end)(void *ctx);
    /* Counters since creation; callable at any time. */
    int (*graph_stats)(void *ctx, pib_graph_stats *out);
} pib_vtable;

typedef struct pib_backend {
    const pib_vtable *vt;
    void *ctx;
} pib_backend;

#ifdef __cplusplus
}
#endif

#endif /* PIB_BACKEND_H */
