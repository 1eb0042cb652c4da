// The decision behind a GPU module's prompt GEMM (backends/gpu_common/gpu_blas_loader.hpp):
// the vendor library when the switch allows it and the library has every entry point, else the
// module's own kernels with the reason. The system calls are faked, so no library is needed.
#include "gpu_common/gpu_blas_loader.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

using pi::gpu::blas::load;
using pi::gpu::blas::system_calls;

// What the fake system holds: the libraries that open, the symbols that resolve, and a log of
// the calls.
struct fake_system {
    std::vector<std::string> libraries, symbols, opened, closed;
};
fake_system* sys = nullptr;

int token = 0; // the address every open library and symbol resolves to

void* fake_open(const char* name) {
    sys->opened.emplace_back(name);
    for (const std::string& l : sys->libraries)
        if (l == name) return &token;
    return nullptr;
}
void* fake_symbol(void*, const char* name) {
    for (const std::string& s : sys->symbols)
        if (s == name) return &token;
    return nullptr;
}
void fake_close(void*) {
    sys->closed.emplace_back("closed");
}

constexpr system_calls calls{fake_open, fake_symbol, fake_close};
constexpr const char* names[] = {"libcublas.so.13", "libcublas.so.12"};
constexpr const char* entry_points[] = {"cublasCreate_v2", "cublasGemmEx"};

} // namespace

TEST_CASE("the GPU BLAS loader takes the first library that opens, with every entry point") {
    fake_system s{{"libcublas.so.12"}, {"cublasCreate_v2", "cublasGemmEx"}, {}, {}};
    sys = &s;
    const auto l = load(nullptr, names, entry_points, calls);
    REQUIRE(l.ok());
    CHECK(std::string(l.name) == "libcublas.so.12");
    CHECK(l.entry[0] == &token);
    CHECK(l.entry[1] == &token);
    CHECK(s.opened == std::vector<std::string>{"libcublas.so.13", "libcublas.so.12"});
    CHECK(s.closed.empty());
}

TEST_CASE("the GPU BLAS loader falls back to the own kernels when no library is found") {
    fake_system s{{}, {"cublasCreate_v2", "cublasGemmEx"}, {}, {}};
    sys = &s;
    const auto l = load(nullptr, names, entry_points, calls);
    CHECK_FALSE(l.ok());
    CHECK(std::string(l.why) == "libcublas.so.13 or libcublas.so.12 not found");
    const char* one[] = {"libcublas.so.13"};
    CHECK(std::string(load(nullptr, one, entry_points, calls).why) == "libcublas.so.13 not found");
}

TEST_CASE("POWERINFER_GPU_BLAS=0 keeps the own kernels without looking for a library") {
    fake_system s{{"libcublas.so.13"}, {"cublasCreate_v2", "cublasGemmEx"}, {}, {}};
    sys = &s;
    const auto l = load("0", names, entry_points, calls);
    CHECK_FALSE(l.ok());
    CHECK(std::string(l.why) == "POWERINFER_GPU_BLAS=0");
    CHECK(s.opened.empty());
    // Any other value, or none, lets the library be used.
    CHECK(load("1", names, entry_points, calls).ok());
    CHECK(load("", names, entry_points, calls).ok());
}

TEST_CASE("a library without an entry point is closed and named in the reason") {
    fake_system s{{"libcublas.so.13"}, {"cublasCreate_v2"}, {}, {}};
    sys = &s;
    const auto l = load(nullptr, names, entry_points, calls);
    CHECK_FALSE(l.ok());
    CHECK(std::string(l.why) == "libcublas.so.13 has no cublasGemmEx");
    CHECK(s.closed.size() == 1);
    CHECK(l.entry[0] == nullptr);
}
