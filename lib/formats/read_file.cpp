#include "formats/read_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/error.hpp"

namespace pi::formats {

namespace {

// Closes the descriptor on every path out of read_file.
struct descriptor {
    int fd;
    ~descriptor() {
        if (fd >= 0) ::close(fd);
    }
};

// 64 MiB: progress and cancellation stay responsive on multi-gigabyte files.
constexpr size_t chunk = size_t(64) << 20;

} // namespace

file_contents read_file(const std::string& path, const read_progress& progress) {
    const descriptor d{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (d.fd < 0) fail(status::io, path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(d.fd, &st) != 0) fail(status::io, path, ": cannot stat: ", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(status::io, path, ": is not a regular file");
    file_contents out;
    out.size = static_cast<size_t>(st.st_size);
    out.data = allocate_aligned(out.size, path);
    for (size_t at = 0; at < out.size;) {
        const size_t want = std::min(chunk, out.size - at);
        const ssize_t got = ::pread(d.fd, out.data.get() + at, want, static_cast<off_t>(at));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail(status::io, path, ": read failed: ", std::strerror(errno));
        if (got == 0)
            fail(status::io, path, ": the file shrank from ", out.size, " to ", at,
                 " bytes while being read");
        at += static_cast<size_t>(got);
        if (progress.fn &&
            !progress.fn(static_cast<float>(at) / static_cast<float>(out.size), progress.user_data))
            fail(status::cancelled, path, ": reading cancelled by the progress callback");
    }
    return out;
}

} // namespace pi::formats
