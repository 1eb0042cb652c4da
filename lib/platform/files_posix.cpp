#include "platform/files.hpp"

#include <cerrno>
#include <cstring>
#include <new>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pi::platform {

namespace {

// Closes the descriptor on every path out of map_read_only; the mapping outlives it.
struct descriptor {
    int fd;
    ~descriptor() {
        if (fd >= 0) ::close(fd);
    }
};

std::string failed(const char* what) {
    return std::string(what) + ": " + std::strerror(errno);
}

} // namespace

std::string last_error_text() {
    return std::strerror(errno);
}

bool map_read_only(const std::string& path, file_mapping& out, std::string& error) {
    const descriptor d{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (d.fd < 0) return error = failed("cannot open"), false;
    struct stat st {};
    if (::fstat(d.fd, &st) != 0) return error = failed("cannot stat"), false;
    if (!S_ISREG(st.st_mode)) return error = "is not a regular file", false;
    out = {nullptr, static_cast<std::size_t>(st.st_size)};
    if (out.size == 0) return true;
    void* p = ::mmap(nullptr, out.size, PROT_READ, MAP_PRIVATE, d.fd, 0);
    if (p == MAP_FAILED) return error = failed("cannot map"), false;
    out.data = static_cast<const uint8_t*>(p);
    return true;
}

void unmap(const file_mapping& m) noexcept {
    if (m.data) ::munmap(const_cast<uint8_t*>(m.data), m.size);
}

void release_pages(const uint8_t* data, std::size_t n) noexcept {
    if (n == 0) return;
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(data) + n;
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::FILE* open_file(const std::string& path, const char* mode) {
    return std::fopen(path.c_str(), mode);
}

std::FILE* create_new_file(const std::string& path, bool& exists, std::string& error) {
    exists = false;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        exists = errno == EEXIST;
        error = std::strerror(errno);
        return nullptr;
    }
    std::FILE* f = ::fdopen(fd, "wb");
    if (!f) {
        error = std::strerror(errno);
        ::close(fd);
        ::unlink(path.c_str());
    }
    return f;
}

bool sync_file(std::FILE* f) noexcept {
    return std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
}

bool replace_file(const std::string& from, const std::string& to, std::string& error) {
    if (std::rename(from.c_str(), to.c_str()) == 0) return true;
    error = std::strerror(errno);
    return false;
}

// A folder that cannot be opened (no read permission), or no memory for its name, keeps the
// rename, which has already happened, without the flush: nothing after the rename may fail.
void sync_folder_of(const std::string& path) noexcept {
    try {
        const std::size_t slash = path.find_last_of('/');
        const std::string folder = slash == std::string::npos ? "."
                                   : slash == 0               ? "/"
                                                              : path.substr(0, slash);
        const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return;
        ::fsync(fd);
        ::close(fd);
    } catch (const std::bad_alloc&) {
    }
}

bool remove_file(const std::string& path) noexcept {
    return std::remove(path.c_str()) == 0;
}

std::filesystem::path utf8_path(const std::string& path) {
    return std::filesystem::path(path);
}

std::string utf8_string(const std::filesystem::path& path) {
    return path.string();
}

} // namespace pi::platform
