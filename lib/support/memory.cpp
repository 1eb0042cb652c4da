#include "support/memory.hpp"

#include <atomic>
#include <new>

#include "support/error.hpp"

namespace pi {

namespace {

// Relaxed is enough: a test installs the hook before the calls it wants to fail, on the thread
// that makes them (or before starting the threads that do).
std::atomic<alloc_fault_hook> fault_hook{nullptr};

} // namespace

void set_alloc_fault_hook(alloc_fault_hook hook) noexcept {
    fault_hook.store(hook, std::memory_order_relaxed);
}

bool alloc_fault(size_t bytes) noexcept {
    const alloc_fault_hook hook = fault_hook.load(std::memory_order_relaxed);
    return hook != nullptr && hook(bytes);
}

void aligned_free::operator()(uint8_t* p) const noexcept {
    ::operator delete[](p, std::align_val_t{large_buffer_alignment});
}

aligned_bytes allocate_aligned(size_t bytes, std::string_view what) {
    void* p = ::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t{large_buffer_alignment},
                               std::nothrow);
    if (!p) fail(status::out_of_memory, "out of memory: ", bytes, " bytes for ", what);
    return aligned_bytes(static_cast<uint8_t*>(p));
}

} // namespace pi
