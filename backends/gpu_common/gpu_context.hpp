#pragma once
// The state behind the GPU backend's void* ctx, its buffers, and the checked tensor views the
// kernels receive. Shared by every kernel file (CUDA, HIP and the CPU simulation).
#include "gpu_graph.hpp"
#include "gpu_runtime.hpp"
#include "pib_backend.h"

#include <cstddef>
#include <cstdint>

namespace pi::gpu {

// Type ids of lib/quant/types.hpp that the GPU kernels handle.
enum : uint32_t { type_f32 = 0, type_f16 = 1, type_q4_0 = 2, type_q8_0 = 8, type_i32 = 18 };

// How rows of a type are stored: elements and bytes per block (1 and the element size for
// plain types), and the alignment every row needs. block == 0 for a type the kernels lack.
struct type_layout {
    std::size_t block = 0;
    std::size_t bytes = 0;
    std::size_t align = 0;
};

inline type_layout layout_of(uint32_t type) {
    switch (type) {
    case type_f32:
    case type_i32:
        return {1, 4, 4};
    case type_f16:
        return {1, 2, 2};
    case type_q4_0:
        return {w_q4_0::block, w_q4_0::block_bytes, w_q4_0::align};
    case type_q8_0:
        return {w_q8_0::block, w_q8_0::block_bytes, w_q8_0::align};
    default:
        return {};
    }
}

struct context {
    int device = 0;
    cudaStream_t stream = nullptr;
    // The transfer stream of version 5's copies, and the events that order it against the
    // kernels' stream (transfer_after_kernels, kernels_after_transfers).
    cudaStream_t transfer = nullptr;
    cudaEvent_t kernels_done = nullptr, transfers_done = nullptr;
    // Kernels that meet an index outside its range (device data the host cannot check before
    // launching) set this flag; synchronize and buffer_download report it and clear it.
    int* fault = nullptr;
    int* fault_host = nullptr; // pinned, for reading the flag back
    // Partial sums of the split-list column-sparse accumulate, allocated once at creation.
    float* scratch = nullptr;
    std::size_t scratch_floats = 0;
    int multiprocessors = 1;
    char name[256] = {};
    // gpu_blas.cu: the vendor BLAS handle (created at the first prompt product; blas_failed
    // when that or binding it to `stream` failed, and the own kernels run from then on) and the
    // binary16 staging of x and of dequantized weight slabs.
    void* blas = nullptr;
    bool blas_failed = false;
    void* blas_stage = nullptr;
    std::size_t blas_stage_bytes = 0;
    // gpu_graph.cu: the graph session's recorded kernels and the graphs of earlier sessions.
    graph_state graphs;
};

inline context* as_context(void* ctx) {
    return static_cast<context*>(ctx);
}

// A validated 2-D view of device memory, passed to kernels by value.
struct view {
    unsigned char* base = nullptr; // row 0
    int64_t ne0 = 0;
    int64_t ne1 = 0;
    std::size_t nb1 = 0;
    uint32_t type = 0;
    // Makes the tail padding a member: a recorded launch (gpu_graph.hpp) compares arguments
    // as bytes, and padding bytes hold whatever was there.
    uint32_t unused = 0;

    template <class T> PI_HD T* row(int64_t r) const {
        return reinterpret_cast<T*>(base + static_cast<std::size_t>(r) * nb1);
    }
    PI_HD unsigned char* row_bytes(int64_t r) const {
        return base + static_cast<std::size_t>(r) * nb1;
    }
    bool is(uint32_t t) const { return type == t; }
    bool same_shape(const view& o) const { return ne0 == o.ne0 && ne1 == o.ne1; }
    // Every row starts on `align` bytes.
    bool rows_aligned(std::size_t align) const {
        return reinterpret_cast<std::uintptr_t>(base) % align == 0 &&
               (ne1 <= 1 || nb1 % align == 0);
    }
};

static_assert(sizeof(view) == 40, "view has no padding bytes");

// Validates t (non-null, supported type, whole blocks per row, rows inside the buffer and
// aligned for the type) and fills v: PIB_OK, PIB_ERR_INVALID_ARGUMENT, or PIB_ERR_UNSUPPORTED
// for another type.
int make_view(const pib_tensor* t, view& v);

struct view_arg {
    const pib_tensor* t;
    view* v;
};

// make_view for several tensors; the first error wins.
template <std::size_t N> int make_views(const view_arg (&list)[N]) {
    for (const view_arg& a : list)
        if (const int s = make_view(a.t, *a.v); s != PIB_OK) return s;
    return PIB_OK;
}

inline bool is_i32_vector(const view& v, int64_t n) {
    return v.is(type_i32) && v.ne0 == n && v.ne1 == 1;
}

// The status of the launches issued since the last check.
int launch_status();

// kernel<<<grid, block>>>(args...) on the context's stream, or recorded in a graph session.
template <class... P, class... A>
void launch(context& c, void (*kernel)(P...), dim3 grid, dim3 block, A... args) {
    if (c.graphs.recording)
        c.graphs.run.add(kernel, grid, block, args...);
    else
        launch_now(kernel, grid, block, c.stream, args...);
}

// gpu_graph.cu: submits the kernels recorded since the last submission (none outside a graph
// session), as a graph or one by one; the first error of the run.
int submit_recorded(context& c);

// Status of a runtime call.
int status_of(cudaError_t e);

// Blocks of `per_block` items covering n, capped at 2^30: kernels whose blocks are rows or
// tokens loop over the grid past that; column counts that large would not fit in memory.
inline unsigned blocks_for(int64_t n, int64_t per_block) {
    const int64_t b = (n + per_block - 1) / per_block;
    return static_cast<unsigned>(b < (int64_t{1} << 30) ? b : (int64_t{1} << 30));
}

} // namespace pi::gpu

struct pib_buffer {
    unsigned char* data = nullptr; // device memory
    std::size_t size = 0;
};
