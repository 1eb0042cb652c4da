// The registry of built-in backends (pib_builtin.h): the one file that knows which backends are
// linked into the library. Adding one takes a line here and a link in backends/CMakeLists.txt.
#include "pib_builtin.h"

#include "cpu/cpu_backend.h"

#include <cstring>

namespace {

constexpr pib_builtin_backend builtins[] = {
    {"cpu", pib_cpu_backend_create},
};

} // namespace

extern "C" const pib_builtin_backend* pib_builtin_backend_find(const char* name) {
    if (!name) return nullptr;
    for (const pib_builtin_backend& b : builtins)
        if (std::strcmp(b.name, name) == 0) return &b;
    return nullptr;
}
