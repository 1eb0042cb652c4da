#pragma once
// The library's allocations that do not go through a plain operator new, in one place, so that a
// program (or the fault-injection tests, tests/faults/, docs/robustness.md) sees every one of
// them: large buffers come from the aligned operator new, which a program can replace like any
// other, and file mappings ask the fault hook first.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace pi {

// Fault injection, for tests. The hook is asked before each allocation the library makes
// outside operator new (today: the mapping of a file, mapped_file) and returns true to make that
// allocation fail as it would without memory (status::out_of_memory). Allocations through
// operator new are failed by replacing operator new, as tests/faults/ does. nullptr removes the
// hook. Install it before other threads use the library.
using alloc_fault_hook = bool (*)(size_t bytes);
void set_alloc_fault_hook(alloc_fault_hook hook) noexcept;

// True when the installed hook fails an allocation of `bytes`. Its cost without a hook is one
// relaxed atomic load of a null pointer, paid once per file opened, never per token.
bool alloc_fault(size_t bytes) noexcept;

// A large host buffer (a model file read into memory), aligned like a page so that its contents
// sit exactly as they would in a mapping.
inline constexpr size_t large_buffer_alignment = 4096;
struct aligned_free {
    void operator()(uint8_t* p) const noexcept;
};
using aligned_bytes = std::unique_ptr<uint8_t[], aligned_free>;

// `bytes` bytes (at least one) from the aligned, non-throwing operator new; throws
// pi::error(out_of_memory) naming `what` and the size when there is no memory.
aligned_bytes allocate_aligned(size_t bytes, std::string_view what);

} // namespace pi
