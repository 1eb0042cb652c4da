#include "support/memory.hpp"

#include "support/error.hpp"

namespace pi {

aligned_bytes allocate_aligned(size_t bytes, std::string_view what) {
    aligned_bytes p = platform::allocate_buffer(bytes, large_buffer_alignment);
    if (!p) fail(status::out_of_memory, "out of memory: ", bytes, " bytes for ", what);
    return p;
}

} // namespace pi
