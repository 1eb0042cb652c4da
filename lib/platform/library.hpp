#pragma once
// Shared libraries opened at run time (the GPU backend modules): dlopen on POSIX, LoadLibraryW on
// Windows.
#include <string>

namespace pi::platform {

// The library at `path` (UTF-8) with every symbol resolved now and none made global; null with
// `error` set on failure.
void* library_open(const std::string& path, std::string& error);
void* library_symbol(void* library, const char* name) noexcept;
void library_close(void* library) noexcept;

// The file name of module `stem` on this OS: libSTEM.so, libSTEM.dylib or STEM.dll.
std::string library_file_name(const std::string& stem);

// The file of the binary (executable or shared library) whose code holds `address`; "" when the
// OS does not say.
std::string binary_path_of(const void* address);

// What separates the folders of a search-path variable: ':' on POSIX, ';' on Windows.
char path_list_separator() noexcept;

} // namespace pi::platform
