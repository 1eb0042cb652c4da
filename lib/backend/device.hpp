#pragma once
// RAII over a pib_backend instance and its buffers; turns kernel statuses into pi::error.
#include <cstddef>
#include <string>
#include <utility>

#include "pib_backend.h"
#include "quant/types.hpp"
#include "support/error.hpp"

namespace pi {

class device;

class buffer {
  public:
    buffer() = default;
    buffer(device* dev, pib_buffer* buf) : dev_(dev), buf_(buf) {}
    buffer(buffer&& o) noexcept
        : dev_(std::exchange(o.dev_, nullptr)), buf_(std::exchange(o.buf_, nullptr)) {}
    buffer& operator=(buffer&& o) noexcept;
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    ~buffer() { reset(); }

    pib_buffer* get() const noexcept { return buf_; }
    explicit operator bool() const noexcept { return buf_ != nullptr; }
    void reset() noexcept;

  private:
    device* dev_ = nullptr;
    pib_buffer* buf_ = nullptr;
};

// Host memory from a backend's host_alloc (page-locked for a GPU), freed with it.
class host_memory {
  public:
    host_memory() = default;
    host_memory(device* dev, void* ptr) : dev_(dev), ptr_(ptr) {}
    host_memory(host_memory&& o) noexcept
        : dev_(std::exchange(o.dev_, nullptr)), ptr_(std::exchange(o.ptr_, nullptr)) {}
    host_memory& operator=(host_memory&& o) noexcept;
    host_memory(const host_memory&) = delete;
    host_memory& operator=(const host_memory&) = delete;
    ~host_memory() { reset(); }

    void* get() const noexcept { return ptr_; }
    explicit operator bool() const noexcept { return ptr_ != nullptr; }
    void reset() noexcept;

  private:
    device* dev_ = nullptr;
    void* ptr_ = nullptr;
};

class device {
  public:
    static device cpu(int n_threads, size_t memory_capacity = 0);
    // Device `device_index` of a backend module ("cuda", "hip"; lib/backend/module_loader.hpp).
    // Throws pi::error (status::unsupported, with the reason) when the module is absent or
    // cannot drive that device.
    static device from_module(const std::string& name, int device_index);
    device() = default;
    device(device&& o) noexcept : be_(std::exchange(o.be_, pib_backend{nullptr, nullptr})) {}
    device& operator=(device&& o) noexcept;
    device(const device&) = delete;
    device& operator=(const device&) = delete;
    ~device();

    const pib_vtable& vt() const noexcept { return *be_.vt; }
    void* ctx() const noexcept { return be_.ctx; }

    buffer alloc(size_t size);
    buffer wrap_host(void* ptr, size_t size);
    void upload(const buffer& b, size_t offset, const void* src, size_t n);
    void download(const buffer& b, size_t offset, void* dst, size_t n);
    void set_n_threads(int n);

    // Version 5 of the vtable (pib_backend.h): page-locked host memory and the transfer stream.
    bool has_host_alloc() const noexcept { return be_.vt->host_alloc && be_.vt->host_free; }
    host_memory host_alloc(size_t size); // the backend must have host_alloc
    bool has_transfers() const noexcept {
        const pib_vtable& v = *be_.vt;
        return v.transfer_upload && v.transfer_download && v.transfer_after_kernels &&
               v.kernels_after_transfers && v.transfer_wait;
    }

    // Version 6: the batch's kernels submitted as graphs (graph_begin, graph_end, graph_stats).
    bool has_graphs() const noexcept {
        const pib_vtable& v = *be_.vt;
        return v.graph_begin && v.graph_end && v.graph_stats;
    }

    // Calls a kernel of the vtable and throws pi::error naming `what` on failure.
    template <typename Fn, typename... Args>
    void run(const char* what, Fn pib_vtable::*fn, Args&&... args) {
        if (be_.vt->*fn == nullptr) check(what, PIB_ERR_UNSUPPORTED);
        check(what, (be_.vt->*fn)(be_.ctx, std::forward<Args>(args)...));
    }
    static void check(const char* what, int status);
    // The vtable's mul_mat_sparse2 (y0 from w0 and y1 from w1, sharing x and the lists): the
    // backend's joint kernel where it has one, else its mul_mat_sparse twice.
    void mul_mat_sparse2(const char* what, const pib_tensor& w0, const pib_tensor& w1,
                         const pib_tensor& x, const pib_tensor& idx, const pib_tensor& count,
                         const pib_tensor& y0, const pib_tensor& y1);

  private:
    pib_backend be_{nullptr, nullptr};
};

// A 2-D view of `rows` rows of `cols` elements at byte `offset` of `buf`.
inline pib_tensor view(const buffer& buf, size_t offset, ggml_type type, int64_t cols,
                       int64_t rows) {
    return pib_tensor{static_cast<uint32_t>(type), cols,      rows,
                      row_bytes(type, cols),       buf.get(), offset};
}

// The first `rows` rows of t (same row stride).
inline pib_tensor first_rows(pib_tensor t, int64_t rows) {
    t.ne1 = rows;
    return t;
}

// Rows [r0, r1) of t.
inline pib_tensor row_range(pib_tensor t, int64_t r0, int64_t r1) {
    t.offset += static_cast<size_t>(r0) * t.nb1;
    t.ne1 = r1 - r0;
    return t;
}

} // namespace pi
