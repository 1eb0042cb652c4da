// The CPU backend's vtable: device facts, threads, host buffers with a memory capacity, the
// choice of kernel level, and the door from the C function pointers to the kernels (no exception
// crosses it).
#include "cpu_backend.h"

#include "cpu_context.hpp"
#include "cpu_features.hpp"
#include "cpu_kernels.hpp"
#include "quant/types.hpp"

#include "platform/parallel.hpp"
#include "platform/system.hpp"

#include <cstring>
#include <limits>
#include <memory>
#include <new>

namespace pi::cpu {

namespace {

constexpr std::size_t unknown_memory = std::numeric_limits<std::size_t>::max();

// The OS says 0 when it does not know.
std::size_t known_or_unknown(std::size_t bytes) {
    return bytes != 0 ? bytes : unknown_memory;
}

std::size_t physical_ram() {
    return known_or_unknown(platform::physical_ram());
}

std::size_t available_ram() {
    return known_or_unknown(platform::available_ram());
}

// The status of f(context&), with a null context rejected and exceptions turned into codes.
template <class F> int guarded(void* ctx, F&& f) noexcept {
    if (ctx == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    try {
        return f(*as_context(ctx));
    } catch (const std::bad_alloc&) {
        return PIB_ERR_OUT_OF_MEMORY;
    } catch (...) {
        return PIB_ERR_DEVICE;
    }
}

// entry<&kernel>::fn is the C-callable vtable slot of a kernel taking (context&, args...).
template <auto Kernel> struct entry;
template <class... A, int (*Kernel)(context&, A...)> struct entry<Kernel> {
    static int fn(void* ctx, A... args) noexcept {
        return guarded(ctx, [&](context& c) { return Kernel(c, args...); });
    }
};

void destroy(void* ctx) {
    std::unique_ptr<context>{as_context(ctx)};
}

// More threads than the hardware offers would only be refused by TBB's worker limit (and would
// oversubscribe the pool's).
int set_threads(context& c, int32_t n_threads) {
    const int hardware = platform::default_concurrency();
    const int n = n_threads > 0 && n_threads < hardware ? n_threads : hardware;
    c.arena.reset();
    c.arena.emplace(n);
    c.n_threads = n;
    return PIB_OK;
}

int device_info(context& c, pib_device_info* out) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    const std::size_t used = c.used.load();
    out->name = c.name;
    out->kind = "cpu";
    out->memory_total = c.capacity;
    out->memory_free = c.capacity - used;
    if (c.capacity_is_ram && available_ram() < out->memory_free) out->memory_free = available_ram();
    out->host_visible = 1;
    out->weight_types = 0;
    for (const pi::ggml_type t :
         {pi::ggml_type::f32, pi::ggml_type::f16, pi::ggml_type::q4_0, pi::ggml_type::q4_1,
          pi::ggml_type::q5_0, pi::ggml_type::q5_1, pi::ggml_type::q8_0, pi::ggml_type::q2_k,
          pi::ggml_type::q3_k, pi::ggml_type::q4_k, pi::ggml_type::q5_k, pi::ggml_type::q6_k})
        out->weight_types |= PIB_TYPE_BIT(static_cast<uint32_t>(t));
    return PIB_OK;
}

// Charges `size` bytes to the capacity, or fails when they would not fit.
bool reserve(context& c, std::size_t size) {
    std::size_t cur = c.used.load();
    do {
        if (size > c.capacity || cur > c.capacity - size) return false;
    } while (!c.used.compare_exchange_weak(cur, cur + size));
    return true;
}

int buffer_alloc(context& c, std::size_t size, pib_buffer** out) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    if (!reserve(c, size)) return PIB_ERR_OUT_OF_MEMORY;
    try {
        platform::buffer storage = platform::allocate_buffer(size, buffer_alignment);
        if (!storage) throw std::bad_alloc();
        auto buf = std::make_unique<pib_buffer>();
        buf->data = storage.get();
        buf->size = size;
        buf->owner = &c;
        buf->storage = std::move(storage);
        *out = buf.release();
        return PIB_OK;
    } catch (const std::bad_alloc&) {
        c.used -= size;
        return PIB_ERR_OUT_OF_MEMORY;
    }
}

// Wrapped memory belongs to the caller (often an mmapped model file), so it is not charged to
// the capacity.
int buffer_from_host(context&, void* ptr, std::size_t size, pib_buffer** out) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    if (ptr == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    auto buf = std::make_unique<pib_buffer>();
    buf->data = static_cast<std::byte*>(ptr);
    buf->size = size;
    *out = buf.release();
    return PIB_OK;
}

void buffer_free(void*, pib_buffer* buf) {
    const std::unique_ptr<pib_buffer> owned{buf};
    if (owned && owned->owner != nullptr) owned->owner->used -= owned->size;
}

std::size_t buffer_size(void*, const pib_buffer* buf) {
    return buf != nullptr ? buf->size : 0;
}

void* buffer_host_ptr(void*, pib_buffer* buf) {
    return buf != nullptr ? buf->data : nullptr;
}

bool in_range(const pib_buffer* buf, std::size_t offset, std::size_t n) {
    return buf != nullptr && offset <= buf->size && n <= buf->size - offset;
}

int buffer_upload(context&, pib_buffer* buf, std::size_t offset, const void* src, std::size_t n) {
    if (!in_range(buf, offset, n) || (src == nullptr && n > 0)) return PIB_ERR_INVALID_ARGUMENT;
    if (n > 0) std::memcpy(buf->data + offset, src, n);
    return PIB_OK;
}

int buffer_download(context&, const pib_buffer* buf, std::size_t offset, void* dst, std::size_t n) {
    if (!in_range(buf, offset, n) || (dst == nullptr && n > 0)) return PIB_ERR_INVALID_ARGUMENT;
    if (n > 0) std::memcpy(dst, buf->data + offset, n);
    return PIB_OK;
}

int buffer_clear(context&, pib_buffer* buf, std::size_t offset, std::size_t n) {
    if (!in_range(buf, offset, n)) return PIB_ERR_INVALID_ARGUMENT;
    if (n > 0) std::memset(buf->data + offset, 0, n);
    return PIB_OK;
}

// Every kernel has finished when it returns.
int synchronize(context&) {
    return PIB_OK;
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
    // Version 5: the CPU's memory is the host's, so there is nothing to pin and nothing to
    // transfer beside the kernels.
    .host_alloc = nullptr,
    .host_free = nullptr,
    .transfer_upload = nullptr,
    .transfer_download = nullptr,
    .transfer_after_kernels = nullptr,
    .kernels_after_transfers = nullptr,
    .transfer_wait = nullptr,
    // Version 6: a CPU kernel call costs no launch that a graph would save.
    .graph_begin = nullptr,
    .graph_end = nullptr,
    .graph_stats = nullptr,
};

} // namespace

} // namespace pi::cpu

extern "C" int pib_cpu_backend_create_with(int32_t n_threads, size_t memory_capacity,
                                           int32_t kernels, pib_backend* out) {
    using namespace pi::cpu;
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    out->vt = nullptr;
    out->ctx = nullptr;
    if (kernels < PIB_CPU_KERNELS_AUTO || kernels > PIB_CPU_KERNELS_NEON_FP16)
        return PIB_ERR_INVALID_ARGUMENT;
    const int32_t level = kernels == PIB_CPU_KERNELS_AUTO ? auto_kernels() : kernels;
    if (!kernels_supported(level)) return PIB_ERR_UNSUPPORTED;
    try {
        auto c = std::make_unique<context>();
        c->capacity = memory_capacity != 0 ? memory_capacity : physical_ram();
        c->capacity_is_ram = memory_capacity == 0;
        c->simd = kernels_table(level);
        c->name = device_name(level);
        set_threads(*c, n_threads);
        out->vt = &vtable;
        out->ctx = c.release();
        return PIB_OK;
    } catch (const std::bad_alloc&) {
        return PIB_ERR_OUT_OF_MEMORY;
    } catch (...) {
        return PIB_ERR_DEVICE;
    }
}

extern "C" int pib_cpu_backend_create(int32_t n_threads, size_t memory_capacity, pib_backend* out) {
    return pib_cpu_backend_create_with(n_threads, memory_capacity, PIB_CPU_KERNELS_AUTO, out);
}
