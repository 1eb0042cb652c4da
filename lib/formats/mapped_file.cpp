#include "formats/mapped_file.hpp"

#include "platform/files.hpp"
#include "support/error.hpp"

namespace pi::formats {

mapped_file::mapped_file(const std::string& path) {
    platform::file_mapping m;
    if (std::string why; !platform::map_read_only(path, m, why)) fail(status::io, path, ": ", why);
    data_ = m.data;
    size_ = m.size; // an empty file gives an empty span, which reads as a too-short file
}

mapped_file::~mapped_file() {
    platform::unmap({data_, size_});
}

} // namespace pi::formats
