#include "platform/library.hpp"
#include "win32_text.hpp"

namespace pi::platform {

void* library_open(const std::string& path, std::string& error) {
    // The module's own folder is searched for the DLLs it depends on (its GPU runtime).
    HMODULE h =
        ::LoadLibraryExW(win32::widen(path).c_str(), nullptr,
                         LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    if (h == nullptr) error = win32::error_text(::GetLastError());
    return reinterpret_cast<void*>(h);
}

void* library_symbol(void* library, const char* name) noexcept {
    return reinterpret_cast<void*>(::GetProcAddress(static_cast<HMODULE>(library), name));
}

void library_close(void* library) noexcept {
    if (library) ::FreeLibrary(static_cast<HMODULE>(library));
}

std::string library_file_name(const std::string& stem) {
    return stem + ".dll";
}

std::string binary_path_of(const void* address) {
    HMODULE module = nullptr;
    if (!::GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                                  GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                              static_cast<LPCWSTR>(address), &module))
        return {};
    std::wstring name(MAX_PATH, L'\0');
    for (;;) {
        const DWORD n = ::GetModuleFileNameW(module, name.data(), static_cast<DWORD>(name.size()));
        if (n == 0) return {};
        if (n < name.size()) {
            name.resize(n);
            return win32::narrow(name);
        }
        name.resize(name.size() * 2);
    }
}

char path_list_separator() noexcept {
    return ';';
}

} // namespace pi::platform
