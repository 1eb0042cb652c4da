#pragma once
// Which GEMM a module's prompt products use: a vendor BLAS found at run time, or the module's own
// tiled kernel. Plain host code with the system calls passed in, so that the decision (the
// POWERINFER_GPU_BLAS switch, a missing library, a library without an entry point) is tested on
// any machine (tests/conformance/test_gpu_blas_loader.cpp); gpu_blas.cu passes dlopen.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <span>

namespace pi::gpu::blas {

// The loader's view of the platform: open a library by name (null when it cannot), look up a
// symbol (null when absent), close.
struct system_calls {
    void* (*open)(const char* name);
    void* (*symbol)(void* library, const char* name);
    void (*close)(void* library);
};

// What the decision found. On success `library` is open and entry[i] is symbols[i]; otherwise
// `why` says why the own kernels run ("libcublas.so.13 not found").
template <std::size_t N> struct loaded {
    void* library = nullptr;
    const char* name = nullptr; // the library's file name
    void* entry[N] = {};
    char why[160] = {};

    bool ok() const noexcept { return library != nullptr; }
};

// The library's switch: any value but "0" (or none) lets the library be tried.
inline bool switched_off(const char* value) noexcept {
    return value != nullptr && std::strcmp(value, "0") == 0;
}

// `switch_value`: POWERINFER_GPU_BLAS's value (null when unset). `names`: the libraries to try
// in order. `symbols`: the entry points needed, all of them from the first library that opens;
// one that lacks any is closed and not replaced by a later name, whose version would differ
// from what that library's presence says is installed.
template <std::size_t N>
loaded<N> load(const char* switch_value, std::span<const char* const> names,
               const char* const (&symbols)[N], const system_calls& sys) {
    loaded<N> l;
    if (switched_off(switch_value)) {
        std::snprintf(l.why, sizeof l.why, "POWERINFER_GPU_BLAS=0");
        return l;
    }
    for (const char* name : names) {
        void* lib = sys.open(name);
        if (lib == nullptr) continue;
        for (std::size_t i = 0; i < N; ++i) {
            l.entry[i] = sys.symbol(lib, symbols[i]);
            if (l.entry[i] != nullptr) continue;
            std::snprintf(l.why, sizeof l.why, "%s has no %s", name, symbols[i]);
            sys.close(lib);
            for (void*& e : l.entry)
                e = nullptr;
            return l;
        }
        l.library = lib;
        l.name = name;
        return l;
    }
    // "a not found", "a or b not found": the names tried, in order.
    std::size_t at = 0;
    for (std::size_t i = 0; i < names.size() && at < sizeof l.why; ++i) {
        const int n =
            std::snprintf(l.why + at, sizeof l.why - at, "%s%s", i == 0 ? "" : " or ", names[i]);
        if (n < 0) break;
        at += static_cast<std::size_t>(n);
    }
    if (at < sizeof l.why) std::snprintf(l.why + at, sizeof l.why - at, " not found");
    return l;
}

} // namespace pi::gpu::blas
