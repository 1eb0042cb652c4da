// The GPU backend's vtable: device facts, device-memory buffers, the stream, the fault flag,
// and the door from the C function pointers to the kernels.
#include "gpu_backend.hpp"
#include "gpu_blas.hpp"
#include "gpu_dispatch.hpp"
#include "gpu_kernels.hpp"
#include "pib_tensor_extent.h"

#include <cstdio>
#include <memory>
#include <new>

namespace pi::gpu {

namespace {

// The split-list partial sums of axpy_sparse: 4 MiB bounds the split for large outputs.
constexpr std::size_t scratch_bytes = std::size_t{4} << 20;

// Asked for its attributes at creation: fails when the module has no code this GPU can run.
__global__ void probe_kernel() {}

// The status of f(context&), with the context's device made current first.
template <class F> int guarded(void* ctx, F&& f) noexcept {
    if (ctx == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    context& c = *as_context(ctx);
    if (const int s = status_of(cudaSetDevice(c.device)); s != PIB_OK) return s;
    try {
        return f(c);
    } catch (const std::bad_alloc&) {
        return PIB_ERR_OUT_OF_MEMORY;
    } catch (...) {
        return PIB_ERR_DEVICE;
    }
}

template <auto Kernel> struct entry;
template <class... A, int (*Kernel)(context&, A...)> struct entry<Kernel> {
    static int fn(void* ctx, A... args) noexcept {
        return guarded(ctx, [&](context& c) { return Kernel(c, args...); });
    }
};

// Waits for the stream, then reports (and clears) a fault raised by a kernel since last time.
int drain(context& c) {
    if (const int s = status_of(
            cudaMemcpyAsync(c.fault_host, c.fault, sizeof(int), cudaMemcpyDeviceToHost, c.stream));
        s != PIB_OK)
        return s;
    if (const int s = status_of(cudaMemsetAsync(c.fault, 0, sizeof(int), c.stream)); s != PIB_OK)
        return s;
    if (const int s = status_of(cudaStreamSynchronize(c.stream)); s != PIB_OK) return s;
    return *c.fault_host != 0 ? PIB_ERR_INVALID_ARGUMENT : PIB_OK;
}

// Teardown cannot report failures; it releases whatever the context holds.
void release(context* c) {
    if (c == nullptr) return;
    static_cast<void>(cudaSetDevice(c->device));
    if (c->stream != nullptr) static_cast<void>(cudaStreamSynchronize(c->stream));
    if (c->transfer != nullptr) static_cast<void>(cudaStreamSynchronize(c->transfer));
    release_graphs(*c);
    release_blas(*c); // its handle is bound to the stream
    if (c->kernels_done != nullptr) static_cast<void>(cudaEventDestroy(c->kernels_done));
    if (c->transfers_done != nullptr) static_cast<void>(cudaEventDestroy(c->transfers_done));
    if (c->transfer != nullptr) static_cast<void>(cudaStreamDestroy(c->transfer));
    static_cast<void>(cudaFree(c->scratch));
    static_cast<void>(cudaFree(c->fault));
    static_cast<void>(cudaFreeHost(c->fault_host));
    if (c->stream != nullptr) static_cast<void>(cudaStreamDestroy(c->stream));
    delete c;
}

void destroy(void* ctx) {
    release(as_context(ctx));
}

int device_info(context& c, pib_device_info* out) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    std::size_t free_bytes = 0, total = 0;
    if (const int s = status_of(cudaMemGetInfo(&free_bytes, &total)); s != PIB_OK) return s;
    out->name = c.name;
    out->kind = PI_GPU_KIND;
    out->memory_total = total;
    out->memory_free = free_bytes;
    out->host_visible = 0;
    // The types the element-wise kernels dispatch on: every kernel reads those.
    out->weight_types = 0;
    for (uint32_t t = 0; t < 64; ++t)
        if (with_weight_elements(t, [](auto) { return PIB_OK; }) == PIB_OK)
            out->weight_types |= PIB_TYPE_BIT(t);
    return PIB_OK;
}

// The GPU runs its own thread grid; host threads do not apply.
int set_threads(context&, int32_t) {
    return PIB_OK;
}

int buffer_alloc(context&, std::size_t size, pib_buffer** out) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    auto buf = std::make_unique<pib_buffer>();
    if (size > 0) {
        void* p = nullptr;
        if (const int s = status_of(cudaMalloc(&p, size)); s != PIB_OK) {
            static_cast<void>(cudaGetLastError()); // not to be taken for a kernel's failure
            return s;
        }
        buf->data = static_cast<unsigned char*>(p);
    }
    buf->size = size;
    *out = buf.release();
    return PIB_OK;
}

// Kernels cannot read pageable host memory, and pinning an mmapped model would not make its
// reads over the bus worth it.
int buffer_from_host(context&, void*, std::size_t, pib_buffer** out) {
    if (out != nullptr) *out = nullptr;
    return PIB_ERR_UNSUPPORTED;
}

void buffer_free(void* ctx, pib_buffer* buf) {
    const std::unique_ptr<pib_buffer> owned{buf};
    if (owned == nullptr || owned->data == nullptr) return;
    if (ctx != nullptr) static_cast<void>(cudaSetDevice(as_context(ctx)->device));
    static_cast<void>(cudaFree(owned->data));
}

std::size_t buffer_size(void*, const pib_buffer* buf) {
    return buf != nullptr ? buf->size : 0;
}

void* buffer_host_ptr(void*, pib_buffer*) {
    return nullptr;
}

bool in_range(const pib_buffer* buf, std::size_t offset, std::size_t n) {
    return buf != nullptr && offset <= buf->size && n <= buf->size - offset;
}

// Waits for the copy so that the caller may reuse `src` as soon as this returns.
int buffer_upload(context& c, pib_buffer* buf, std::size_t offset, const void* src, std::size_t n) {
    if (!in_range(buf, offset, n) || (src == nullptr && n > 0)) return PIB_ERR_INVALID_ARGUMENT;
    if (const int s = submit_recorded(c); s != PIB_OK) return s;
    if (n == 0) return PIB_OK;
    if (const int s = status_of(
            cudaMemcpyAsync(buf->data + offset, src, n, cudaMemcpyHostToDevice, c.stream));
        s != PIB_OK)
        return s;
    return status_of(cudaStreamSynchronize(c.stream));
}

// Data that a faulting kernel produced is never handed out as a success.
int buffer_download(context& c, const pib_buffer* buf, std::size_t offset, void* dst,
                    std::size_t n) {
    if (!in_range(buf, offset, n) || (dst == nullptr && n > 0)) return PIB_ERR_INVALID_ARGUMENT;
    if (const int s = submit_recorded(c); s != PIB_OK) return s;
    if (n > 0) {
        if (const int s = status_of(
                cudaMemcpyAsync(dst, buf->data + offset, n, cudaMemcpyDeviceToHost, c.stream));
            s != PIB_OK)
            return s;
    }
    return drain(c);
}

int buffer_clear(context& c, pib_buffer* buf, std::size_t offset, std::size_t n) {
    if (!in_range(buf, offset, n)) return PIB_ERR_INVALID_ARGUMENT;
    if (const int s = submit_recorded(c); s != PIB_OK) return s;
    if (n == 0) return PIB_OK;
    return status_of(cudaMemsetAsync(buf->data + offset, 0, n, c.stream));
}

int synchronize(context& c) {
    if (const int s = submit_recorded(c); s != PIB_OK) return s;
    return drain(c);
}

// Version 5. Page-locked memory lets the copy engines reach it without a staging copy, so
// transfers overlap kernels and run at the bus's speed.
int host_alloc(context&, std::size_t size, void** out) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    if (const int s = status_of(cudaMallocHost(out, size == 0 ? 1 : size)); s != PIB_OK) {
        static_cast<void>(cudaGetLastError());
        *out = nullptr;
        return s;
    }
    return PIB_OK;
}

void host_free(void* ctx, void* ptr) {
    if (ptr == nullptr) return;
    if (ctx != nullptr) static_cast<void>(cudaSetDevice(as_context(ctx)->device));
    static_cast<void>(cudaFreeHost(ptr));
}

int transfer_upload(context& c, pib_buffer* buf, std::size_t offset, const void* src,
                    std::size_t n) {
    if (!in_range(buf, offset, n) || (src == nullptr && n > 0)) return PIB_ERR_INVALID_ARGUMENT;
    if (n == 0) return PIB_OK;
    return status_of(
        cudaMemcpyAsync(buf->data + offset, src, n, cudaMemcpyHostToDevice, c.transfer));
}

int transfer_download(context& c, const pib_buffer* buf, std::size_t offset, void* dst,
                      std::size_t n) {
    if (!in_range(buf, offset, n) || (dst == nullptr && n > 0)) return PIB_ERR_INVALID_ARGUMENT;
    if (n == 0) return PIB_OK;
    return status_of(
        cudaMemcpyAsync(dst, buf->data + offset, n, cudaMemcpyDeviceToHost, c.transfer));
}

int transfer_after_kernels(context& c) {
    if (const int s = submit_recorded(c); s != PIB_OK) return s;
    if (const int s = status_of(cudaEventRecord(c.kernels_done, c.stream)); s != PIB_OK) return s;
    return status_of(cudaStreamWaitEvent(c.transfer, c.kernels_done, 0));
}

int kernels_after_transfers(context& c) {
    if (const int s = submit_recorded(c); s != PIB_OK) return s;
    if (const int s = status_of(cudaEventRecord(c.transfers_done, c.transfer)); s != PIB_OK)
        return s;
    return status_of(cudaStreamWaitEvent(c.stream, c.transfers_done, 0));
}

int transfer_wait(context& c) {
    return status_of(cudaStreamSynchronize(c.transfer));
}

const pib_vtable vtable = {
    .api_version = PIB_API_VERSION,
    .destroy = destroy,
    .device_info = entry<&device_info>::fn,
    .set_n_threads = entry<&set_threads>::fn,
    .buffer_alloc = entry<&buffer_alloc>::fn,
    .buffer_from_host = entry<&buffer_from_host>::fn,
    .buffer_free = buffer_free,
    .buffer_size = buffer_size,
    .buffer_host_ptr = buffer_host_ptr,
    .buffer_upload = entry<&buffer_upload>::fn,
    .buffer_download = entry<&buffer_download>::fn,
    .buffer_clear = entry<&buffer_clear>::fn,
    .synchronize = entry<&synchronize>::fn,
    .get_rows = entry<&get_rows>::fn,
    .set_rows = entry<&set_rows>::fn,
    .mul_mat = entry<&mul_mat>::fn,
    .mul_mat_sparse = entry<&mul_mat_sparse>::fn,
    .mul_mat_sparse2 = entry<&mul_mat_sparse2>::fn,
    .axpy_sparse = entry<&axpy_sparse>::fn,
    .select_active = entry<&select_active>::fn,
    .rms_norm = entry<&rms_norm>::fn,
    .rope = entry<&rope>::fn,
    .attention = entry<&attention>::fn,
    .add = entry<&add>::fn,
    .relu = entry<&relu>::fn,
    .glu = entry<&glu>::fn,
    .layer_norm = entry<&layer_norm>::fn,
    .add_row = entry<&add_row>::fn,
    .host_alloc = entry<&host_alloc>::fn,
    .host_free = host_free,
    .transfer_upload = entry<&transfer_upload>::fn,
    .transfer_download = entry<&transfer_download>::fn,
    .transfer_after_kernels = entry<&transfer_after_kernels>::fn,
    .kernels_after_transfers = entry<&kernels_after_transfers>::fn,
    .transfer_wait = entry<&transfer_wait>::fn,
    .graph_begin = entry<&graph_begin>::fn,
    .graph_end = entry<&graph_end>::fn,
    .graph_stats = entry<&graph_stats>::fn,
};

} // namespace

int status_of(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return PIB_OK;
    case cudaErrorMemoryAllocation:
        return PIB_ERR_OUT_OF_MEMORY;
    default:
        return PIB_ERR_DEVICE;
    }
}

int launch_status() {
    return status_of(cudaGetLastError());
}

int make_view(const pib_tensor* t, view& v) {
    if (t == nullptr || t->buffer == nullptr || t->ne0 < 0 || t->ne1 < 0)
        return PIB_ERR_INVALID_ARGUMENT;
    const type_layout l = layout_of(t->type);
    if (l.block == 0) return PIB_ERR_UNSUPPORTED;
    if (static_cast<std::size_t>(t->ne0) % l.block != 0) return PIB_ERR_INVALID_ARGUMENT;
    std::size_t row = 0;
    if (!pib_mul_fits(static_cast<std::size_t>(t->ne0) / l.block, l.bytes, &row) ||
        !pib_view_fits(t, row, t->buffer->size))
        return PIB_ERR_INVALID_ARGUMENT;
    v = view{t->buffer->data + t->offset, t->ne0, t->ne1, t->nb1, t->type, 0};
    if (!v.rows_aligned(l.align)) return PIB_ERR_INVALID_ARGUMENT;
    return PIB_OK;
}

int create(int32_t device_index, pib_backend* out, char* why, std::size_t why_size) {
    auto c = std::unique_ptr<context, void (*)(context*)>(new (std::nothrow) context, release);
    if (c == nullptr) return PIB_ERR_OUT_OF_MEMORY;
    c->device = device_index;
    cudaDeviceProp prop{};
    cudaError_t e = cudaSetDevice(device_index);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, device_index);
    if (e == cudaSuccess) {
        cudaFuncAttributes attr{};
        if (const cudaError_t k =
                cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&probe_kernel));
            k != cudaSuccess) {
            if (why != nullptr && why_size > 0)
                std::snprintf(
                    why, why_size,
                    "%s device %d (%s): this module has no code for it (built for %s): %s",
                    PI_GPU_VENDOR, static_cast<int>(device_index), prop.name, PI_GPU_ARCHITECTURES,
                    cudaGetErrorString(k));
            static_cast<void>(cudaGetLastError());
            return PIB_ERR_UNSUPPORTED;
        }
    }
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->transfer, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->kernels_done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->transfers_done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&c->fault), sizeof(int));
    if (e == cudaSuccess) e = cudaMallocHost(reinterpret_cast<void**>(&c->fault_host), sizeof(int));
    if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&c->scratch), scratch_bytes);
    if (e == cudaSuccess) e = cudaMemsetAsync(c->fault, 0, sizeof(int), c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        if (why != nullptr && why_size > 0)
            std::snprintf(why, why_size, "%s device %d: %s", PI_GPU_VENDOR,
                          static_cast<int>(device_index), cudaGetErrorString(e));
        static_cast<void>(cudaGetLastError());
        return status_of(e);
    }
    std::snprintf(c->name, sizeof c->name, "%s", prop.name);
    c->scratch_floats = scratch_bytes / sizeof(float);
    c->multiprocessors = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    out->vt = &vtable;
    out->ctx = c.release();
    return PIB_OK;
}

} // namespace pi::gpu
