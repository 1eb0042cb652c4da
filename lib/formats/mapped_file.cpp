#include "formats/mapped_file.hpp"

#include "platform/files.hpp"
#include "support/error.hpp"
#include "support/memory.hpp"

namespace pi::formats {

mapped_file::mapped_file(const std::string& path) {
    platform::file_mapping m;
    if (std::string why; !platform::map_read_only(path, m, why)) fail(status::io, path, ": ", why);
    // The fault hook stands for the address space running out, which only a mapping of some
    // size can meet; an empty file gives an empty span, which reads as a too-short file.
    if (m.size != 0 && alloc_fault(m.size)) {
        platform::unmap(m);
        fail(status::out_of_memory, path, ": cannot map ", m.size, " bytes: out of memory");
    }
    data_ = m.data;
    size_ = m.size;
}

mapped_file::~mapped_file() {
    platform::unmap({data_, size_});
}

} // namespace pi::formats
