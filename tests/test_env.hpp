#pragma once
// setenv/unsetenv for the tests on POSIX and Windows (where the C runtime has _putenv_s, and an
// empty value removes the variable).
#include <cstdlib>

namespace pi::test {

inline int set_env(const char* name, const char* value) {
#if defined(_WIN32)
    return _putenv_s(name, value);
#else
    return ::setenv(name, value, 1);
#endif
}

inline int unset_env(const char* name) {
#if defined(_WIN32)
    return _putenv_s(name, "");
#else
    return ::unsetenv(name);
#endif
}

} // namespace pi::test
