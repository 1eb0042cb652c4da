#pragma once
// The one exception type of the core. lib/api/ turns it into a pi_status plus message.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace pi {

// Values mirror pi_status in include/powerinfer.h (checked there by static_assert).
enum class status : int {
    ok = 0,
    cancelled = 1,
    invalid_argument = -1,
    io = -2,
    format = -3,
    unsupported = -4,
    out_of_memory = -5,
    context_full = -6,
    internal = -7,
};

class error : public std::runtime_error {
public:
    error(status code, const std::string& message) : std::runtime_error(message), code_(code) {}
    status code() const noexcept { return code_; }

private:
    status code_;
};

// Streams swallow exceptions by default: an allocation failing inside one would silently
// truncate the text (a tensor name looked up, a state saved). With badbit in the exception mask
// the failure is rethrown instead.
inline void throw_on_stream_failure(std::ios& stream) {
    stream.exceptions(std::ios::badbit);
}

template <typename... Parts> std::string concat(Parts&&... parts) {
    std::ostringstream out;
    throw_on_stream_failure(out);
    (out << ... << std::forward<Parts>(parts));
    return out.str();
}

template <typename... Parts> [[noreturn]] void fail(status code, Parts&&... parts) {
    throw error(code, concat(std::forward<Parts>(parts)...));
}

} // namespace pi
