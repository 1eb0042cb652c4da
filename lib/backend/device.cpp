#include "backend/device.hpp"

#include "pib_builtin.h"

namespace pi {

buffer& buffer::operator=(buffer&& o) noexcept {
    if (this != &o) {
        reset();
        dev_ = std::exchange(o.dev_, nullptr);
        buf_ = std::exchange(o.buf_, nullptr);
    }
    return *this;
}

void buffer::reset() noexcept {
    if (buf_) dev_->vt().buffer_free(dev_->ctx(), buf_);
    buf_ = nullptr;
    dev_ = nullptr;
}

device device::cpu(int n_threads, size_t memory_capacity) {
    const pib_builtin_backend* cpu = pib_builtin_backend_find("cpu");
    if (!cpu) fail(status::internal, "this build has no built-in CPU backend");
    device d;
    check("creating the CPU backend", cpu->create(n_threads, memory_capacity, &d.be_));
    return d;
}

device& device::operator=(device&& o) noexcept {
    if (this != &o) {
        if (be_.vt) be_.vt->destroy(be_.ctx);
        be_ = std::exchange(o.be_, pib_backend{nullptr, nullptr});
    }
    return *this;
}

device::~device() {
    if (be_.vt) be_.vt->destroy(be_.ctx);
}

buffer device::alloc(size_t size) {
    pib_buffer* b = nullptr;
    check("allocating a buffer", be_.vt->buffer_alloc(be_.ctx, size, &b));
    return buffer(this, b);
}

host_memory& host_memory::operator=(host_memory&& o) noexcept {
    if (this != &o) {
        reset();
        dev_ = std::exchange(o.dev_, nullptr);
        ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
}

void host_memory::reset() noexcept {
    if (dev_ && ptr_) dev_->vt().host_free(dev_->ctx(), ptr_);
    ptr_ = nullptr;
    dev_ = nullptr;
}

host_memory device::host_alloc(size_t size) {
    void* p = nullptr;
    if (!has_host_alloc()) check("allocating host memory", PIB_ERR_UNSUPPORTED);
    check("allocating host memory", be_.vt->host_alloc(be_.ctx, size, &p));
    return host_memory(this, p);
}

buffer device::wrap_host(void* ptr, size_t size) {
    pib_buffer* b = nullptr;
    check("wrapping host memory", be_.vt->buffer_from_host(be_.ctx, ptr, size, &b));
    return buffer(this, b);
}

void device::upload(const buffer& b, size_t offset, const void* src, size_t n) {
    check("uploading", be_.vt->buffer_upload(be_.ctx, b.get(), offset, src, n));
}

void device::download(const buffer& b, size_t offset, void* dst, size_t n) {
    check("downloading", be_.vt->buffer_download(be_.ctx, b.get(), offset, dst, n));
}

void device::set_n_threads(int n) {
    check("setting threads", be_.vt->set_n_threads(be_.ctx, n));
}

void device::check(const char* what, int st) {
    switch (st) {
    case PIB_OK:
        return;
    case PIB_ERR_OUT_OF_MEMORY:
        fail(status::out_of_memory, "backend out of memory while ", what);
    case PIB_ERR_UNSUPPORTED:
        fail(status::unsupported, "backend does not support ", what);
    case PIB_ERR_INVALID_ARGUMENT:
        fail(status::internal, "backend rejected the arguments of ", what);
    default:
        fail(status::internal, "backend failure (", st, ") in ", what);
    }
}

void device::mul_mat_sparse2(const char* what, const pib_tensor& w0, const pib_tensor& w1,
                             const pib_tensor& x, const pib_tensor& idx, const pib_tensor& count,
                             const pib_tensor& y0, const pib_tensor& y1) {
    if (be_.vt->mul_mat_sparse2 != nullptr) {
        run(what, &pib_vtable::mul_mat_sparse2, &w0, &w1, &x, &idx, &count, &y0, &y1);
        return;
    }
    run(what, &pib_vtable::mul_mat_sparse, &w0, &x, &idx, &count, &y0);
    run(what, &pib_vtable::mul_mat_sparse, &w1, &x, &idx, &count, &y1);
}

} // namespace pi
