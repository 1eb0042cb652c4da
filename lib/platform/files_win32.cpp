#include "platform/files.hpp"
#include "win32_text.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <io.h>

namespace pi::platform {

using win32::error_text;
using win32::widen;

namespace {

// Closes a handle on every path out of map_read_only; the view outlives both handles.
struct handle {
    HANDLE h;
    ~handle() {
        if (h != nullptr && h != INVALID_HANDLE_VALUE) ::CloseHandle(h);
    }
};

std::string failed(const char* what) {
    return std::string(what) + ": " + error_text(::GetLastError());
}

} // namespace

std::string last_error_text() {
    const DWORD code = ::GetLastError();
    return code != 0 ? error_text(code) : std::strerror(errno);
}

bool map_read_only(const std::string& path, file_mapping& out, std::string& error) {
    // FILE_SHARE_DELETE: like a POSIX mapping, the file may be renamed over while mapped.
    const handle file{::CreateFileW(widen(path).c_str(), GENERIC_READ,
                                    FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                    OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr)};
    if (file.h == INVALID_HANDLE_VALUE) {
        // A folder cannot be opened without FILE_FLAG_BACKUP_SEMANTICS: say what it is.
        const DWORD attributes = ::GetFileAttributesW(widen(path).c_str());
        if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY))
            return error = "is not a regular file", false;
        return error = failed("cannot open"), false;
    }
    if (::GetFileType(file.h) != FILE_TYPE_DISK) return error = "is not a regular file", false;
    LARGE_INTEGER size{};
    if (!::GetFileSizeEx(file.h, &size)) return error = failed("cannot stat"), false;
    out = {nullptr, static_cast<std::size_t>(size.QuadPart)};
    if (out.size == 0) return true;
    const handle mapping{::CreateFileMappingW(file.h, nullptr, PAGE_READONLY, 0, 0, nullptr)};
    if (mapping.h == nullptr) return error = failed("cannot map"), false;
    const void* view = ::MapViewOfFile(mapping.h, FILE_MAP_READ, 0, 0, 0);
    if (view == nullptr) return error = failed("cannot map"), false;
    out.data = static_cast<const uint8_t*>(view);
    return true;
}

void unmap(const file_mapping& m) noexcept {
    if (m.data) ::UnmapViewOfFile(m.data);
}

// Unlocking pages that are not locked takes them out of the working set: the documented way to
// trim part of a view.
void release_pages(const uint8_t* data, std::size_t n) noexcept {
    if (n != 0) ::VirtualUnlock(const_cast<uint8_t*>(data), n);
}

std::FILE* open_file(const std::string& path, const char* mode) {
    return ::_wfopen(widen(path).c_str(), widen(mode).c_str());
}

std::FILE* create_new_file(const std::string& path, bool& exists, std::string& error) {
    exists = false;
    const HANDLE h = ::CreateFileW(widen(path).c_str(), GENERIC_WRITE, FILE_SHARE_READ, nullptr,
                                   CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) {
        const DWORD code = ::GetLastError();
        exists = code == ERROR_FILE_EXISTS || code == ERROR_ALREADY_EXISTS;
        error = error_text(code);
        return nullptr;
    }
    const int fd = ::_open_osfhandle(reinterpret_cast<intptr_t>(h), _O_WRONLY | _O_BINARY);
    std::FILE* f = fd >= 0 ? ::_fdopen(fd, "wb") : nullptr;
    if (!f) {
        error = std::strerror(errno);
        if (fd >= 0)
            ::_close(fd);
        else
            ::CloseHandle(h);
        ::DeleteFileW(widen(path).c_str());
    }
    return f;
}

bool sync_file(std::FILE* f) noexcept {
    if (std::fflush(f) != 0) return false;
    const HANDLE h = reinterpret_cast<HANDLE>(::_get_osfhandle(::_fileno(f)));
    return h != INVALID_HANDLE_VALUE && ::FlushFileBuffers(h);
}

bool replace_file(const std::string& from, const std::string& to, std::string& error) {
    if (::MoveFileExW(widen(from).c_str(), widen(to).c_str(),
                      MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
        return true;
    error = error_text(::GetLastError());
    return false;
}

// MOVEFILE_WRITE_THROUGH has flushed the rename; Windows has no folder to flush.
void sync_folder_of(const std::string&) noexcept {}

bool remove_file(const std::string& path) noexcept {
    return ::DeleteFileW(widen(path).c_str()) != 0;
}

std::filesystem::path utf8_path(const std::string& path) {
    return std::filesystem::path(widen(path));
}

std::string utf8_string(const std::filesystem::path& path) {
    return win32::narrow(path.wstring());
}

} // namespace pi::platform
