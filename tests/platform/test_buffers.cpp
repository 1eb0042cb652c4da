#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

#include "platform/buffers.hpp"

using namespace pi::platform;

namespace {

bool aligned(const std::byte* p, std::size_t alignment) {
    return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

std::size_t hook_calls = 0;
bool fail_every_allocation(std::size_t) {
    ++hook_calls;
    return true;
}

} // namespace

TEST_CASE("buffers are aligned and writable, small ones from the heap, large ones from pages") {
    for (const std::size_t bytes :
         {std::size_t(0), std::size_t(1), std::size_t(1000), page_buffer_threshold - 1,
          page_buffer_threshold, std::size_t(3) << 20}) {
        CAPTURE(bytes);
        const std::size_t before = page_buffer_bytes();
        {
            const buffer b = allocate_buffer(bytes, 64);
            REQUIRE(b);
            CHECK(aligned(b.get(), 64));
            std::memset(b.get(), 0xA5, bytes == 0 ? 1 : bytes);
            const bool paged = buffers_use_pages() && bytes >= page_buffer_threshold;
            CHECK(b.get_deleter().pages == paged);
            CHECK(page_buffer_bytes() == before + (paged ? bytes : 0));
        }
        CHECK(page_buffer_bytes() == before);
    }
    const buffer page_aligned = allocate_buffer(page_buffer_threshold, max_buffer_alignment);
    REQUIRE(page_aligned);
    CHECK(aligned(page_aligned.get(), max_buffer_alignment));
}

TEST_CASE("the peak of page-backed bytes holds the most held since its reset") {
    reset_page_buffer_peak();
    const std::size_t base = page_buffer_bytes();
    {
        const buffer a = allocate_buffer(std::size_t(1) << 20, 64);
        const buffer b = allocate_buffer(std::size_t(2) << 20, 64);
        REQUIRE((a && b));
    }
    const std::size_t expected = buffers_use_pages() ? std::size_t(3) << 20 : 0;
    CHECK(page_buffer_peak() == base + expected);
    reset_page_buffer_peak();
    CHECK(page_buffer_peak() == base);
}

TEST_CASE("the fault hook fails page-backed buffers and file-like allocations, not heap ones") {
    hook_calls = 0;
    set_alloc_fault_hook(&fail_every_allocation);
    CHECK(alloc_fault(10));
    const buffer small = allocate_buffer(100, 64);
    const buffer large = allocate_buffer(page_buffer_threshold, 64);
    set_alloc_fault_hook(nullptr);
    CHECK(small);
    CHECK(bool(large) == !buffers_use_pages());
    CHECK(hook_calls == (buffers_use_pages() ? 2u : 1u));
    CHECK_FALSE(alloc_fault(10));
}
