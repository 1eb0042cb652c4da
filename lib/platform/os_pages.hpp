#pragma once
// Whole pages from the OS, read-write, for buffers.cpp: mmap on POSIX, VirtualAlloc on Windows.
#include <cstddef>

namespace pi::platform::detail {

// Null when the OS has no memory for `bytes` (> 0).
void* os_pages_allocate(std::size_t bytes) noexcept;
void os_pages_free(void* p, std::size_t bytes) noexcept;

} // namespace pi::platform::detail
