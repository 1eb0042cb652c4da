#include "support/file_sink.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "platform/files.hpp"
#include "platform/system.hpp"
#include "support/error.hpp"

namespace pi {

file_sink::file_sink(const std::string& target) {
    static std::atomic<uint64_t> serial{0};
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string name =
            concat(target, ".tmp.", platform::process_id(), ".", serial.fetch_add(1));
        bool exists = false;
        std::string why;
        f_ = platform::create_new_file(name, exists, why);
        if (!f_ && exists) continue;
        if (!f_) fail(status::io, name, ": cannot create: ", why);
        path_ = std::move(name);
        return;
    }
    fail(status::io, target, ": cannot find a free temporary name beside it");
}

file_sink::~file_sink() {
    if (f_) std::fclose(f_);
    if (!committed_) platform::remove_file(path_);
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
    const bool ok = platform::sync_file(f_);
    const std::string why = platform::last_error_text();
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok || !closed) fail(status::io, path_, ": write failed: ", why);
}

void file_sink::commit(const std::string& target) {
    close();
    if (std::string why; !platform::replace_file(path_, target, why))
        fail(status::io, target, ": cannot rename ", path_, " into place: ", why);
    committed_ = true;
    platform::sync_folder_of(target);
}

} // namespace pi
