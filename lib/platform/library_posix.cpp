#include "platform/library.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace pi::platform {

void* library_open(const std::string& path, std::string& error) {
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        const char* e = ::dlerror();
        error = e != nullptr ? e : "unknown dlopen error";
    }
    return h;
}

void* library_symbol(void* library, const char* name) noexcept {
    return ::dlsym(library, name);
}

void library_close(void* library) noexcept {
    if (library) ::dlclose(library);
}

std::string library_file_name(const std::string& stem) {
#if defined(__APPLE__)
    return "lib" + stem + ".dylib";
#else
    return "lib" + stem + ".so";
#endif
}

std::string binary_path_of(const void* address) {
    Dl_info info{};
    if (::dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::weakly_canonical(info.dli_fname, ec);
    return ec ? std::string(info.dli_fname) : p.string();
}

char path_list_separator() noexcept {
    return ':';
}

} // namespace pi::platform
