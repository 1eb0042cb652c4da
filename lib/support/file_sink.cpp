#include "support/file_sink.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include <fcntl.h>
#include <unistd.h>

#include "support/error.hpp"

namespace pi {

namespace {

// Makes a rename into `path`'s folder durable; a folder that cannot be opened (no read
// permission), or no memory for its name, keeps the rename, which has already happened, without
// the flush: nothing after the rename may fail the write.
void sync_folder_of(const std::string& path) noexcept {
    try {
        const size_t slash = path.find_last_of('/');
        const std::string folder = slash == std::string::npos ? "."
                                   : slash == 0               ? "/"
                                                              : path.substr(0, slash);
        const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
        if (fd < 0) return;
        ::fsync(fd);
        ::close(fd);
    } catch (const std::bad_alloc&) {
    }
}

} // namespace

file_sink::file_sink(const std::string& target) {
    static std::atomic<uint64_t> serial{0};
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string name = concat(target, ".tmp.", ::getpid(), ".", serial.fetch_add(1));
        const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) fail(status::io, name, ": cannot create: ", std::strerror(errno));
        path_ = std::move(name);
        f_ = ::fdopen(fd, "wb");
        if (!f_) {
            const int err = errno;
            ::close(fd);
            std::remove(path_.c_str());
            fail(status::io, path_, ": cannot create: ", std::strerror(err));
        }
        return;
    }
    fail(status::io, target, ": cannot find a free temporary name beside it");
}

file_sink::~file_sink() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(path_.c_str());
}

void file_sink::bytes(const void* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, f_) != n)
        fail(status::io, path_, ": write failed", where_, ": ", std::strerror(errno));
    pos_ += n;
}

void file_sink::pad(uint64_t alignment) {
    static constexpr uint8_t zeros[256] = {};
    for (uint64_t n = (alignment - pos_ % alignment) % alignment; n != 0;) {
        const size_t chunk = n < sizeof zeros ? static_cast<size_t>(n) : sizeof zeros;
        bytes(zeros, chunk);
        n -= chunk;
    }
}

// Flushes to stable storage so that the rename never exposes a half-written file.
void file_sink::close() {
    const bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
    const int err = errno;
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok || !closed) fail(status::io, path_, ": write failed: ", std::strerror(err));
}

void file_sink::commit(const std::string& target) {
    close();
    if (std::rename(path_.c_str(), target.c_str()) != 0)
        fail(status::io, target, ": cannot rename ", path_, " into place: ", std::strerror(errno));
    committed_ = true;
    sync_folder_of(target);
}

} // namespace pi
