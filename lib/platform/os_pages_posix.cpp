#include "os_pages.hpp"

#include <sys/mman.h>

namespace pi::platform::detail {

void* os_pages_allocate(std::size_t bytes) noexcept {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

void os_pages_free(void* p, std::size_t bytes) noexcept {
    ::munmap(p, bytes);
}

} // namespace pi::platform::detail
