#include "platform/thread_name.hpp"

#include <pthread.h>

#include <cstddef>
#include <string>

namespace pi::platform {

namespace {

// The longest name the OS keeps, in bytes without the terminating zero.
#if defined(__linux__)
constexpr std::size_t max_name_bytes = 15; // TASK_COMM_LEN - 1; longer names fail with ERANGE
#else
constexpr std::size_t max_name_bytes = 63; // macOS: MAXTHREADNAMESIZE - 1
#endif

// `name` cut to `limit` bytes, backing off so as not to split a UTF-8 character.
std::string cut(std::string_view name, std::size_t limit) {
    if (name.size() <= limit) return std::string(name);
    std::size_t n = limit;
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80)
        --n;
    return std::string(name.substr(0, n));
}

} // namespace

bool name_this_thread(std::string_view name) noexcept {
    try {
        const std::string text = cut(name, max_name_bytes);
#if defined(__linux__)
        return ::pthread_setname_np(::pthread_self(), text.c_str()) == 0;
#elif defined(__APPLE__)
        // macOS names only the calling thread, so its call takes no thread.
        return ::pthread_setname_np(text.c_str()) == 0;
#else
        // The BSDs spell it differently each; an unnamed thread is only less convenient.
        static_cast<void>(text);
        return false;
#endif
    } catch (...) {
        return false; // std::bad_alloc: a name is not worth failing for
    }
}

} // namespace pi::platform
