// Global operator new and delete of the fault-injection tests: malloc and free with a count, a
// live and peak byte tally (malloc_usable_size on both sides, so the tally balances) and an armed
// plan that fails the Nth allocation. Under AddressSanitizer malloc and free are its own, so
// LeakSanitizer still sees every block.
#include "alloc_counter.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

#include <execinfo.h>
#include <malloc.h>
#include <unistd.h>

#include "platform/buffers.hpp"

namespace pi::faults {

namespace {

std::atomic<bool> armed{false};
std::atomic<bool> persistent_plan{false};
std::atomic<uint64_t> target{0};
std::atomic<uint64_t> counted{0};
std::atomic<uint64_t> failed{0};
std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};
const bool trace = std::getenv("PI_FAULT_TRACE") != nullptr;

// True when this allocation is to fail.
bool inject() noexcept {
    const uint64_t n = counted.fetch_add(1, std::memory_order_relaxed) + 1;
    if (!armed.load(std::memory_order_relaxed)) return false;
    const uint64_t t = target.load(std::memory_order_relaxed);
    if (n == t || (n > t && persistent_plan.load(std::memory_order_relaxed))) {
        failed.fetch_add(1, std::memory_order_relaxed);
        if (trace) { // PI_FAULT_TRACE=1: where each failed allocation was asked for
            void* frames[32];
            const int depth = backtrace(frames, 32);
            backtrace_symbols_fd(frames, depth, STDERR_FILENO);
            (void)!write(STDERR_FILENO, "----\n", 5);
        }
        return true;
    }
    return false;
}

void track(void* p) noexcept {
    const auto n = static_cast<int64_t>(malloc_usable_size(p));
    const int64_t now = live.fetch_add(n, std::memory_order_relaxed) + n;
    int64_t high = peak.load(std::memory_order_relaxed);
    while (now > high && !peak.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
    }
}

void* allocate(size_t size, size_t alignment) noexcept {
    if (inject()) return nullptr;
    if (size == 0) size = 1;
    void* p = nullptr;
    if (alignment <= alignof(std::max_align_t)) {
        p = std::malloc(size);
    } else if (posix_memalign(&p, alignment, size) != 0) {
        p = nullptr;
    }
    if (p) track(p);
    return p;
}

void release(void* p) noexcept {
    if (!p) return;
    live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
    std::free(p);
}

void* allocate_or_throw(size_t size, size_t alignment) {
    void* p = allocate(size, alignment);
    if (!p) throw std::bad_alloc();
    return p;
}

// The library's hook: a mapping or a page-backed buffer counts as one allocation.
bool library_hook(size_t) {
    return inject();
}

} // namespace

void arm(uint64_t nth, bool persistent) {
    counted.store(0);
    failed.store(0);
    target.store(nth);
    persistent_plan.store(persistent);
    armed.store(true);
}

uint64_t disarm() {
    armed.store(false);
    return failed.load();
}

uint64_t allocations() {
    return counted.load();
}

void reset_count() {
    counted.store(0);
}

int64_t live_bytes() {
    return live.load() + static_cast<int64_t>(platform::page_buffer_bytes());
}

// The two peaks may fall at different moments, so their sum bounds the peak of the total from
// above.
int64_t peak_bytes() {
    return peak.load() + static_cast<int64_t>(platform::page_buffer_peak());
}

void reset_peak() {
    peak.store(live.load());
    platform::reset_page_buffer_peak();
}

void install_library_hook() {
    platform::set_alloc_fault_hook(&library_hook);
}

} // namespace pi::faults

using pi::faults::allocate;
using pi::faults::allocate_or_throw;
using pi::faults::release;

constexpr size_t plain = alignof(std::max_align_t);

void* operator new(size_t n) {
    return allocate_or_throw(n, plain);
}
void* operator new[](size_t n) {
    return allocate_or_throw(n, plain);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
    return allocate(n, plain);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
    return allocate(n, plain);
}
void* operator new(size_t n, std::align_val_t a) {
    return allocate_or_throw(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a) {
    return allocate_or_throw(n, static_cast<size_t>(a));
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return allocate(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return allocate(n, static_cast<size_t>(a));
}

void operator delete(void* p) noexcept {
    release(p);
}
void operator delete[](void* p) noexcept {
    release(p);
}
void operator delete(void* p, size_t) noexcept {
    release(p);
}
void operator delete[](void* p, size_t) noexcept {
    release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    release(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    release(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
    release(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
    release(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    release(p);
}
