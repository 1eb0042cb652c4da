#pragma once
// The C ABI boundary's helpers: every pi_* function body runs inside guard(), which turns
// exceptions into a pi_status and records the message for pi_last_error().
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "powerinfer.h"
#include "support/error.hpp"

namespace pi::api {

void set_last_error(const std::string& message);
void clear_last_error();

template <typename F> pi_status guard(F&& body) noexcept {
    try {
        clear_last_error();
        return body();
    } catch (const pi::error& e) {
        set_last_error(e.what());
        return static_cast<pi_status>(e.code());
    } catch (const std::bad_alloc&) {
        set_last_error("out of memory");
        return PI_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        set_last_error(std::string("internal error: ") + e.what());
        return PI_ERR_INTERNAL;
    } catch (...) {
        set_last_error("internal error: unknown exception");
        return PI_ERR_INTERNAL;
    }
}

// Adapts a pi_progress_callback to the core's `bool (*)(float, void*)` progress hook.
struct progress_bridge {
    pi_progress_callback fn;
    void* user_data;
    static bool call(float progress, void* self) {
        auto* b = static_cast<progress_bridge*>(self);
        return b->fn(progress, b->user_data) != 0;
    }
};

// Throws pi::error(invalid_argument) naming the argument when p is NULL.
template <typename T> T* require(T* p, const char* name) {
    if (!p) fail(status::invalid_argument, "argument '", name, "' is NULL");
    return p;
}

// Copies text and its NUL into a caller's buffer; *len gets the text's size either way, and a
// buffer too short is invalid_argument naming `what` ("text", "report").
inline void write_c_string(const std::string& text, char* buf, size_t capacity, size_t* len,
                           const char* what) {
    *len = text.size();
    if (text.size() + 1 > capacity)
        fail(status::invalid_argument, what, " buffer holds ", capacity, " bytes, ",
             text.size() + 1, " needed (with the terminating NUL)");
    std::memcpy(buf, text.c_str(), text.size() + 1);
}

} // namespace pi::api
