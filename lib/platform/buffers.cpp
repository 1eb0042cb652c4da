#include "platform/buffers.hpp"
#include "os_pages.hpp"

#include <atomic>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define PI_PLATFORM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PI_PLATFORM_ASAN 1
#endif
#endif
#ifndef PI_PLATFORM_ASAN
#define PI_PLATFORM_ASAN 0
#endif

namespace pi::platform {

namespace {

// Relaxed is enough: a test installs the hook before the calls it wants to fail, on the thread
// that makes them (or before starting the threads that do).
std::atomic<alloc_fault_hook> fault_hook{nullptr};

std::atomic<std::size_t> page_bytes{0};
std::atomic<std::size_t> page_peak{0};

void count_pages(std::size_t bytes) noexcept {
    const std::size_t now = page_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t high = page_peak.load(std::memory_order_relaxed);
    while (now > high && !page_peak.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
    }
}

} // namespace

void set_alloc_fault_hook(alloc_fault_hook hook) noexcept {
    fault_hook.store(hook, std::memory_order_relaxed);
}

bool alloc_fault(std::size_t bytes) noexcept {
    const alloc_fault_hook hook = fault_hook.load(std::memory_order_relaxed);
    return hook != nullptr && hook(bytes);
}

void buffer_free::operator()(std::byte* p) const noexcept {
    if (pages) {
        detail::os_pages_free(p, bytes);
        page_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    } else {
        ::operator delete[](p, std::align_val_t{alignment});
    }
}

bool buffers_use_pages() noexcept {
    return !PI_PLATFORM_ASAN;
}

buffer allocate_buffer(std::size_t bytes, std::size_t alignment) noexcept {
    if (bytes == 0) bytes = 1;
    if (buffers_use_pages() && bytes >= page_buffer_threshold) {
        if (alloc_fault(bytes)) return {};
        void* p = detail::os_pages_allocate(bytes);
        if (!p) return {};
        count_pages(bytes);
        return buffer(static_cast<std::byte*>(p), buffer_free{bytes, alignment, true});
    }
    void* p = ::operator new[](bytes, std::align_val_t{alignment}, std::nothrow);
    return buffer(static_cast<std::byte*>(p), buffer_free{bytes, alignment, false});
}

std::size_t page_buffer_bytes() noexcept {
    return page_bytes.load(std::memory_order_relaxed);
}

std::size_t page_buffer_peak() noexcept {
    return page_peak.load(std::memory_order_relaxed);
}

void reset_page_buffer_peak() noexcept {
    page_peak.store(page_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

} // namespace pi::platform
