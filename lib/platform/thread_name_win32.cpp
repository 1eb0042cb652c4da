#include "platform/thread_name.hpp"
#include "win32_text.hpp"

#include <string>

namespace pi::platform {

namespace {

using set_thread_description_fn = HRESULT(WINAPI*)(HANDLE, PCWSTR);

// SetThreadDescription exists from Windows 10 1607 on, and mingw-w64's headers may not declare
// it, so it is looked up in kernel32 once rather than linked.
set_thread_description_fn set_thread_description() noexcept {
    static const set_thread_description_fn fn = [] {
        const HMODULE kernel32 = ::GetModuleHandleW(L"kernel32.dll");
        if (kernel32 == nullptr) return set_thread_description_fn{};
        // Through void(*)(), which GCC's -Wcast-function-type lets convert to any function type.
        return reinterpret_cast<set_thread_description_fn>(
            reinterpret_cast<void (*)()>(::GetProcAddress(kernel32, "SetThreadDescription")));
    }();
    return fn;
}

} // namespace

bool name_this_thread(std::string_view name) noexcept {
    const set_thread_description_fn fn = set_thread_description();
    if (fn == nullptr) return false;
    try {
        const std::wstring wide = win32::widen(std::string(name));
        return SUCCEEDED(fn(::GetCurrentThread(), wide.c_str()));
    } catch (...) {
        return false; // std::bad_alloc: a name is not worth failing for
    }
}

} // namespace pi::platform
