#include "formats/mapped_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/error.hpp"
#include "support/memory.hpp"

namespace pi::formats {

namespace {

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct descriptor {
    int fd;
    ~descriptor() {
        if (fd >= 0) ::close(fd);
    }
};

} // namespace

mapped_file::mapped_file(const std::string& path) {
    const descriptor d{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (d.fd < 0) fail(status::io, path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(d.fd, &st) != 0) fail(status::io, path, ": cannot stat: ", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(status::io, path, ": is not a regular file");
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) return; // mmap refuses length 0; an empty span reads as a too-short file
    if (alloc_fault(size_))
        fail(status::out_of_memory, path, ": cannot map ", size_, " bytes: out of memory");
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, d.fd, 0);
    if (p == MAP_FAILED)
        fail(errno == ENOMEM ? status::out_of_memory : status::io, path,
             ": cannot map: ", std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
}

mapped_file::~mapped_file() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

} // namespace pi::formats
