#pragma once
// Files as the operating system gives them: read-only mappings, exclusive creation, flushing to
// stable storage and replace-by-rename. Paths are UTF-8 everywhere; on Windows they go through
// the wide-character API, so a name outside the ANSI code page still opens.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace pi::platform {

// The text of the calling thread's last OS error (errno, or GetLastError() on Windows).
std::string last_error_text();

struct file_mapping {
    const uint8_t* data = nullptr;
    std::size_t size = 0;
};

// Maps the whole regular file at `path` read-only. An empty file gives {nullptr, 0} (the OSes
// refuse to map zero bytes). False with `error` set ("cannot open: ...") on failure.
bool map_read_only(const std::string& path, file_mapping& out, std::string& error);
void unmap(const file_mapping& m) noexcept;

// Drops the pages of [data, data + n) of a read-only mapping from this process; they stay
// readable and come back from the file on the next access.
void release_pages(const uint8_t* data, std::size_t n) noexcept;

// Opens `path` with fopen's `mode`, the name read as UTF-8.
std::FILE* open_file(const std::string& path, const char* mode);

// Creates `path` for binary writing, never opening an existing file or symbolic link. Null on
// failure, with `exists` telling a name already taken apart from other errors (in `error`).
std::FILE* create_new_file(const std::string& path, bool& exists, std::string& error);

// Flushes f's buffers through the OS to stable storage.
bool sync_file(std::FILE* f) noexcept;

// Renames `from` to `to`, replacing `to` in one step where it exists.
bool replace_file(const std::string& from, const std::string& to, std::string& error);

// Makes a rename into `path`'s folder durable where the OS needs a separate flush for that.
void sync_folder_of(const std::string& path) noexcept;

bool remove_file(const std::string& path) noexcept;

// A std::filesystem::path from UTF-8 and back: std::string converts through the ANSI code page on
// Windows.
std::filesystem::path utf8_path(const std::string& path);
std::string utf8_string(const std::filesystem::path& path);

} // namespace pi::platform
