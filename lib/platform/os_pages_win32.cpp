#include "os_pages.hpp"
#include "win32_text.hpp"

namespace pi::platform::detail {

void* os_pages_allocate(std::size_t bytes) noexcept {
    return ::VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void os_pages_free(void* p, std::size_t) noexcept {
    ::VirtualFree(p, 0, MEM_RELEASE);
}

} // namespace pi::platform::detail
