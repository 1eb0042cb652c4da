#include "api/api_support.hpp"

namespace pi::api {

static_assert(PI_OK == static_cast<int>(status::ok));
static_assert(PI_STATUS_CANCELLED == static_cast<int>(status::cancelled));
static_assert(PI_ERR_INVALID_ARGUMENT == static_cast<int>(status::invalid_argument));
static_assert(PI_ERR_IO == static_cast<int>(status::io));
static_assert(PI_ERR_FORMAT == static_cast<int>(status::format));
static_assert(PI_ERR_UNSUPPORTED == static_cast<int>(status::unsupported));
static_assert(PI_ERR_OUT_OF_MEMORY == static_cast<int>(status::out_of_memory));
static_assert(PI_ERR_CONTEXT_FULL == static_cast<int>(status::context_full));
static_assert(PI_ERR_INTERNAL == static_cast<int>(status::internal));

namespace {
thread_local std::string last_error; // per thread, as the header promises
}

void set_last_error(const std::string& message) {
    last_error = message;
}
void clear_last_error() {
    last_error.clear();
}

} // namespace pi::api

extern "C" {

const char* pi_status_str(pi_status s) {
    switch (s) {
    case PI_OK:
        return "PI_OK";
    case PI_STATUS_CANCELLED:
        return "PI_STATUS_CANCELLED";
    case PI_ERR_INVALID_ARGUMENT:
        return "PI_ERR_INVALID_ARGUMENT";
    case PI_ERR_IO:
        return "PI_ERR_IO";
    case PI_ERR_FORMAT:
        return "PI_ERR_FORMAT";
    case PI_ERR_UNSUPPORTED:
        return "PI_ERR_UNSUPPORTED";
    case PI_ERR_OUT_OF_MEMORY:
        return "PI_ERR_OUT_OF_MEMORY";
    case PI_ERR_CONTEXT_FULL:
        return "PI_ERR_CONTEXT_FULL";
    case PI_ERR_INTERNAL:
        return "PI_ERR_INTERNAL";
    }
    return "PI_ERR_UNKNOWN_STATUS";
}

const char* pi_last_error(void) {
    return pi::api::last_error.c_str();
}

#define PI_STRINGIFY_(x) #x
#define PI_STRINGIFY(x) PI_STRINGIFY_(x)

const char* pi_version(void) {
    return PI_STRINGIFY(PI_VERSION_MAJOR) "." PI_STRINGIFY(PI_VERSION_MINOR) "." PI_STRINGIFY(
        PI_VERSION_PATCH);
}

uint32_t pi_version_number(void) {
    return PI_VERSION_NUMBER;
}

} // extern "C"
