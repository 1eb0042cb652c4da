#include "formats/read_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

#include "platform/files.hpp"
#include "support/error.hpp"

namespace pi::formats {

namespace {

// Closes the file on every path out of read_file.
struct file_closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

// 64 MiB: progress and cancellation stay responsive on multi-gigabyte files.
constexpr size_t chunk = size_t(64) << 20;

} // namespace

file_contents read_file(const std::string& path, const read_progress& progress) {
    // The type before opening: Windows refuses to open a folder at all, POSIX opens it and fails
    // the read. A name that cannot be looked up is left to the open, which says why.
    std::error_code ec;
    const auto native = platform::utf8_path(path);
    const auto type = std::filesystem::status(native, ec).type();
    if (type != std::filesystem::file_type::not_found && type != std::filesystem::file_type::none &&
        type != std::filesystem::file_type::regular)
        fail(status::io, path, ": is not a regular file");
    const std::unique_ptr<std::FILE, file_closer> f{platform::open_file(path, "rb")};
    if (!f) fail(status::io, path, ": cannot open: ", platform::last_error_text());
    const auto size = std::filesystem::file_size(native, ec);
    if (ec) fail(status::io, path, ": cannot stat: ", ec.message());
    file_contents out;
    out.size = static_cast<size_t>(size);
    out.data = allocate_aligned(out.size, path);
    for (size_t at = 0; at < out.size;) {
        const size_t want = std::min(chunk, out.size - at);
        const size_t got = std::fread(out.data.get() + at, 1, want, f.get());
        if (got == 0 && std::ferror(f.get()))
            fail(status::io, path, ": read failed: ", platform::last_error_text());
        if (got == 0)
            fail(status::io, path, ": the file shrank from ", out.size, " to ", at,
                 " bytes while being read");
        at += got;
        if (progress.fn &&
            !progress.fn(static_cast<float>(at) / static_cast<float>(out.size), progress.user_data))
            fail(status::cancelled, path, ": reading cancelled by the progress callback");
    }
    return out;
}

} // namespace pi::formats
