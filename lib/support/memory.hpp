#pragma once
// The large host buffers of lib/ (a model file read into memory): platform::allocate_buffer's,
// with pi::error for the out-of-memory case. The fault hook of the fault-injection tests
// (tests/faults/, docs/robustness.md) lives beside them in platform/buffers.hpp.
#include <cstddef>
#include <string_view>

#include "platform/buffers.hpp"

namespace pi {

using platform::alloc_fault;
using platform::alloc_fault_hook;
using platform::set_alloc_fault_hook;

// Aligned like a page, so that a file's contents sit exactly as they would in a mapping.
inline constexpr size_t large_buffer_alignment = platform::max_buffer_alignment;
using aligned_bytes = platform::buffer;

// `bytes` bytes (at least one); throws pi::error(out_of_memory) naming `what` and the size when
// there is no memory.
aligned_bytes allocate_aligned(size_t bytes, std::string_view what);

} // namespace pi
