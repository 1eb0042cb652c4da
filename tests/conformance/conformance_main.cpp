// The conformance program: `conformance --backend=cpu|gpusim|cuda|hip [--verbose] [doctest
// options]`. The backend under test is the CPU backend with its default kernels, or device 0 of
// a backend module; the oracle is always the CPU backend's scalar reference. Without the module
// or a device the run prints "SKIPPED: <reason>" and succeeds (CTest reports it skipped).
// --verbose prints the outcome of every comparison.
#define DOCTEST_CONFIG_IMPLEMENT
#include "conformance.hpp"

#include "backend/device.hpp"
#include "backend/module_loader.hpp"
#include "cpu/cpu_backend.h"
#include "platform/library.hpp"
#include "support/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr int32_t cpu_threads = 2;

// The CPU backend's scalar reference kernels.
int create_oracle(pib_backend* out) {
    return pib_cpu_backend_create_with(cpu_threads, 0, PIB_CPU_KERNELS_SCALAR, out);
}

// With POWERINFER_GPU_SIM_BLAS naming the tests' stand-in library (reference_blas.cpp), the
// simulation's prompt products must have gone through it, and none may have been refused: a
// refused call falls back to the own kernels, which would hide a wrong argument. 0 when so, or
// when no library is named.
int check_reference_blas(const std::string& backend, bool vendor_gemm) {
    const char* path = std::getenv("POWERINFER_GPU_SIM_BLAS");
    if (backend != "gpusim" || path == nullptr || path[0] == '\0') return 0;
    if (!vendor_gemm) {
        std::fprintf(stderr, "conformance: POWERINFER_GPU_SIM_BLAS is set, yet the simulation's "
                             "prompts did not take it\n");
        return 1;
    }
    std::string error;
    void* lib = pi::platform::library_open(path, error);
    using counts_fn = void (*)(long*, long*);
    const auto counts = lib != nullptr ? reinterpret_cast<counts_fn>(pi::platform::library_symbol(
                                             lib, "pi_reference_blas_counts"))
                                       : nullptr;
    if (counts == nullptr) {
        std::fprintf(stderr, "conformance: %s has no pi_reference_blas_counts %s\n", path,
                     error.c_str());
        if (lib != nullptr) pi::platform::library_close(lib);
        return 1;
    }
    long served = 0, refused = 0;
    counts(&served, &refused);
    pi::platform::library_close(lib);
    std::printf("conformance: the reference BLAS served %ld GEMMs and refused %ld\n", served,
                refused);
    return served > 0 && refused == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    using namespace pi::conformance;
    std::string name = "cpu";
    bool verbose = false;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--backend=", 10) == 0)
            name = argv[i] + 10;
        else if (std::strcmp(argv[i], "--verbose") == 0)
            verbose = true;
        else
            args.push_back(argv[i]);
    }

    std::optional<pi::device> dev;
    try {
        dev = name == "cpu" ? pi::device::cpu(cpu_threads) : pi::device::from_module(name, 0);
    } catch (const pi::error& e) {
        std::printf("SKIPPED: %s\n", e.what());
        return 0;
    }
    pib_backend oracle_backend{};
    if (create_oracle(&oracle_backend) != PIB_OK) {
        std::fprintf(stderr, "conformance: cannot create the CPU reference backend\n");
        return 1;
    }
    backends& b = current();
    b.be[under_test] = pib_backend{&dev->vt(), dev->ctx()};
    b.be[oracle] = oracle_backend;
    b.name = name;
    b.verbose = verbose;

    pib_device_info info{};
    if (dev->vt().device_info(dev->ctx(), &info) == PIB_OK) {
        std::printf("conformance: backend %s, device %s\n", name.c_str(),
                    info.name != nullptr ? info.name : "?");
        b.half_products = info.name != nullptr && std::string(info.name) == "cpu (neon_fp16)";
    }
    // A module's device description says which GEMM its prompt products take.
    if (name != "cpu") {
        const pi::module_status s = pi::probe_backend_module(name);
        const std::string described = s.devices.empty() ? "" : s.devices[0].name;
        const std::size_t at = described.find("prompts: ");
        const std::string gemm = at == std::string::npos ? "?" : described.substr(at + 9);
        std::printf("conformance: prompt products (more than 16 tokens) take %s\n", gemm.c_str());
        b.vendor_gemm = gemm.starts_with("cuBLAS") || gemm.starts_with("hipBLAS");
    }

    doctest::Context context;
    context.applyCommandLine(static_cast<int>(args.size()), args.data());
    int result = context.run();
    oracle_backend.vt->destroy(oracle_backend.ctx);
    if (result == 0) result = check_reference_blas(name, b.vendor_gemm);
    return result;
}
