#pragma once
// The library's large host buffers (a model file read into memory, the CPU backend's KV cache and
// scratch): from the OS's own pages when large, so that freeing one gives its memory back at
// once. From malloc they would stay in the heap: glibc raises its mmap threshold to the largest
// block freed, after which blocks of that size come from the arenas and a program that frees and
// remakes contexts sees its RSS creep up (docs/soak.md). Every allocation made here can be
// failed by the fault hook, and the page-backed bytes are tallied, for the fault-injection tests
// (tests/faults, docs/robustness.md).
#include <cstddef>
#include <memory>

namespace pi::platform {

// Fault injection, for tests. The hook is asked before each allocation the library makes
// outside operator new (a file mapping, a page-backed buffer) and returns true to make that
// allocation fail as it would without memory. Allocations through operator new are failed by
// replacing operator new, as tests/faults/ does. nullptr removes the hook. Install it before
// other threads use the library.
using alloc_fault_hook = bool (*)(std::size_t bytes);
void set_alloc_fault_hook(alloc_fault_hook hook) noexcept;

// True when the installed hook fails an allocation of `bytes`. Its cost without a hook is one
// relaxed atomic load of a null pointer.
bool alloc_fault(std::size_t bytes) noexcept;

// Buffers of at least this many bytes come from the OS's pages (below it the page rounding and
// the system call would cost more than the heap's reuse saves).
inline constexpr std::size_t page_buffer_threshold = std::size_t(64) << 10;
// The most alignment allocate_buffer gives; pages are at least this large on every OS served.
inline constexpr std::size_t max_buffer_alignment = 4096;

struct buffer_free {
    std::size_t bytes = 0;
    std::size_t alignment = 1;
    bool pages = false;
    void operator()(std::byte* p) const noexcept;
};
using buffer = std::unique_ptr<std::byte[], buffer_free>;

// `bytes` bytes (0 gives one byte) on an `alignment` boundary (a power of two, at most
// max_buffer_alignment); empty when there is no memory or the fault hook says so. Under
// AddressSanitizer every buffer comes from operator new, so that overruns past its end are still
// caught.
buffer allocate_buffer(std::size_t bytes, std::size_t alignment) noexcept;

// False under AddressSanitizer, where no buffer is page-backed.
bool buffers_use_pages() noexcept;

// Bytes held in page-backed buffers now, and the most held since reset_page_buffer_peak(): what
// the fault tests add to their own tally of operator new.
std::size_t page_buffer_bytes() noexcept;
std::size_t page_buffer_peak() noexcept;
void reset_page_buffer_peak() noexcept;

} // namespace pi::platform
