// Prompt products through the vendor BLAS, found at run time (gpu_blas.hpp): cuBLAS for the
// CUDA module, hipBLAS for the HIP module, and for the simulation a library of cuBLAS's C API
// that POWERINFER_GPU_SIM_BLAS names (the tests' CPU stand-in, tests/conformance/
// reference_blas.cpp). The modules link neither library nor its headers' functions: the library
// is dlopened on first need and five entry points are resolved (cublas_entry.hpp,
// hipblas_entry.hpp).
#include "gpu_blas.hpp"
#include "gpu_blas_loader.hpp"
#include "gpu_dispatch.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <span>

#if defined(PI_GPU_HIP)
#include "hipblas_entry.hpp"
namespace pi::gpu {
namespace vendor = hipblas;
}
#else
#include "cublas_entry.hpp"
namespace pi::gpu {
namespace vendor = cublas;
}
#endif

#if !defined(PI_GPU_HIP) && !defined(PI_GPU_SIM) && __has_include(<cublas_api.h>)
// For its constants only, to check ours; none of its functions is called, so nothing links.
#include <cublas_api.h>
static_assert(pi::gpu::cublas::success == CUBLAS_STATUS_SUCCESS);
static_assert(pi::gpu::cublas::op_n == CUBLAS_OP_N && pi::gpu::cublas::op_t == CUBLAS_OP_T);
static_assert(pi::gpu::cublas::r_32f == CUDA_R_32F && pi::gpu::cublas::r_16f == CUDA_R_16F);
static_assert(pi::gpu::cublas::compute_32f == CUBLAS_COMPUTE_32F);
static_assert(pi::gpu::cublas::gemm_default == CUBLAS_GEMM_DEFAULT);
static_assert(pi::gpu::cublas::major_version == MAJOR_VERSION &&
              pi::gpu::cublas::minor_version == MINOR_VERSION);
#endif

namespace pi::gpu {

namespace {

constexpr const char* switch_name = "POWERINFER_GPU_BLAS";

// The libraries this module tries: its vendor's, or for the simulation the one the tests name.
std::span<const char* const> library_names() {
#if defined(PI_GPU_SIM)
    static const char* named[1] = {std::getenv("POWERINFER_GPU_SIM_BLAS")};
    if (named[0] == nullptr || named[0][0] == '\0') return {};
    return named;
#else
    return vendor::library_names;
#endif
}

void* open_library(const char* name) {
    return dlopen(name, RTLD_NOW | RTLD_LOCAL);
}
void* find_symbol(void* library, const char* name) {
    return dlsym(library, name);
}
void close_library(void* library) {
    dlclose(library);
}

struct library {
    blas::loaded<std::size(vendor::symbols)> found;
    char path[192] = {};

    template <class F> F fn(vendor::entry e) const { return reinterpret_cast<F>(found.entry[e]); }
};

// Looked for once per process. It stays loaded: contexts hold its handles until they are
// destroyed, and unloading the library is not worth the bookkeeping.
const library& vendor_library() {
    static const library lib = [] {
        library l;
        const std::span<const char* const> names = library_names();
        if (names.empty()) {
            std::snprintf(l.path, sizeof l.path, "own tiled kernels: %s",
                          blas::switched_off(std::getenv(switch_name))
                              ? "POWERINFER_GPU_BLAS=0"
                              : "the GPU simulation has no BLAS library");
            return l;
        }
        l.found = blas::load(std::getenv(switch_name), names, vendor::symbols,
                             blas::system_calls{open_library, find_symbol, close_library});
        if (!l.found.ok()) {
            std::snprintf(l.path, sizeof l.path, "own tiled kernels: %s", l.found.why);
            return l;
        }
        if (!vendor::version_text(l.found.entry, l.path, sizeof l.path)) {
            const char* slash = std::strrchr(l.found.name, '/');
            std::snprintf(l.path, sizeof l.path, "%s (%s)", vendor::vendor_name,
                          slash != nullptr ? slash + 1 : l.found.name);
        }
        return l;
    }();
    return lib;
}

// Weights of a quantized type are dequantized a slab of rows at a time, at most this many
// bytes of binary16. The simulation's slabs are small, so that the conformance suite's matrices
// take several.
#if defined(PI_GPU_SIM)
constexpr std::size_t slab_bytes = std::size_t{4} << 10;
#else
constexpr std::size_t slab_bytes = std::size_t{32} << 20;
#endif
constexpr int convert_threads = 256;

// out[i] = binary16 of element i % ne0 of row r0 + i / ne0, for `rows` rows, contiguous.
template <class W> __global__ void to_half_kernel(view v, int64_t r0, int64_t rows, uint16_t* out) {
    const int64_t n = rows * v.ne0;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride)
        out[i] = float_to_half(W::load(v.row_bytes(r0 + i / v.ne0), i % v.ne0));
}

template <class W>
void to_half(context& c, const view& v, int64_t r0, int64_t rows, uint16_t* out) {
    launch_now(to_half_kernel<W>, dim3(blocks_for(rows * v.ne0, convert_threads)), convert_threads,
               c.stream, v, r0, rows, out);
}

// Leading dimension of a view's rows in elements of `size` bytes; a single row has none of its
// own.
int64_t leading(const view& v, std::size_t size) {
    return v.ne1 <= 1 ? v.ne0 : static_cast<int64_t>(v.nb1 / size);
}

bool fits_int(int64_t v) {
    return v <= INT_MAX;
}

// The context's staging buffer, at least `bytes` long.
uint16_t* stage(context& c, std::size_t bytes) {
    if (c.blas_stage_bytes < bytes) {
        static_cast<void>(cudaFree(c.blas_stage)); // waits for the work that may read it
        c.blas_stage = nullptr;
        c.blas_stage_bytes = 0;
        if (cudaMalloc(&c.blas_stage, bytes) != cudaSuccess) {
            static_cast<void>(cudaGetLastError());
            return nullptr;
        }
        c.blas_stage_bytes = bytes;
    }
    return static_cast<uint16_t*>(c.blas_stage);
}

vendor::handle handle_of(context& c, const library& lib) {
    if (c.blas == nullptr && !c.blas_failed) {
        vendor::handle h = nullptr;
        if (lib.fn<vendor::create_fn>(vendor::create)(&h) != vendor::success) {
            c.blas_failed = true;
            return nullptr;
        }
        c.blas = h;
        if (lib.fn<vendor::set_stream_fn>(vendor::set_stream)(h, c.stream) != vendor::success)
            c.blas_failed = true;
    }
    return c.blas_failed ? nullptr : static_cast<vendor::handle>(c.blas);
}

} // namespace

const char* gemm_path() {
    return vendor_library().path;
}

bool blas_mul_mat(context& c, const view& w, const view& x, const view& y) {
    const library& lib = vendor_library();
    if (!lib.found.ok()) return false;
    const int64_t k = w.ne0, m = w.ne1, n = x.ne1;
    const int64_t ldx = leading(x, sizeof(float)), ldy = leading(y, sizeof(float));
    if (k == 0 || !fits_int(k) || !fits_int(m) || !fits_int(n) || !fits_int(ldx) ||
        !fits_int(ldy) || x.nb1 % sizeof(float) != 0 || y.nb1 % sizeof(float) != 0)
        return false;
    const bool f32 = w.is(type_f32), f16 = w.is(type_f16);
    if (!f32 && !f16 && !w.is(type_q4_0) && !w.is(type_q8_0)) return false;
    const vendor::handle h = handle_of(c, lib);
    if (h == nullptr) return false;
    const auto gemm = lib.fn<vendor::gemm_ex_fn>(vendor::gemm_ex);
    const float one = 1.0f, zero = 0.0f;
    // Row-major y[t][r] = w[r] . x[t] is, column-major, Y (m x n) = W^T (m x k) X (k x n).
    const auto run = [&](const void* a, int a_type, int64_t lda, const void* b, int b_type,
                         int64_t ldb, int64_t rows, float* out) {
        return gemm(h, vendor::op_t, vendor::op_n, static_cast<int>(rows), static_cast<int>(n),
                    static_cast<int>(k), &one, a, a_type, static_cast<int>(lda), b, b_type,
                    static_cast<int>(ldb), &zero, out, vendor::r_32f, static_cast<int>(ldy),
                    vendor::compute_32f, vendor::gemm_default) == vendor::success;
    };
    if (f32) {
        const int64_t ldw = leading(w, sizeof(float));
        if (!fits_int(ldw) || w.nb1 % sizeof(float) != 0) return false;
        return run(w.base, vendor::r_32f, ldw, x.base, vendor::r_32f, ldx, m, y.row<float>(0));
    }
    // The libraries multiply binary16 only by binary16: x goes over as binary16 too, the products
    // summed in float (CUBLAS_COMPUTE_32F).
    const auto x_bytes = static_cast<std::size_t>(n * k) * sizeof(uint16_t);
    const int64_t slab =
        f16 ? 0
            : std::max<int64_t>(1,
                                std::min<int64_t>(m, static_cast<int64_t>(slab_bytes) / (2 * k)));
    uint16_t* xs = stage(c, x_bytes + static_cast<std::size_t>(slab * k) * sizeof(uint16_t));
    if (xs == nullptr) return false;
    to_half<w_f32>(c, x, 0, n, xs);
    if (f16) {
        const int64_t ldw = leading(w, sizeof(uint16_t));
        if (!fits_int(ldw)) return false;
        return run(w.base, vendor::r_16f, ldw, xs, vendor::r_16f, k, m, y.row<float>(0));
    }
    uint16_t* ws = xs + n * k;
    return with_weight_elements(w.type, [&]<class W>(W) {
               for (int64_t r0 = 0; r0 < m; r0 += slab) {
                   const int64_t rows = std::min(slab, m - r0);
                   to_half<W>(c, w, r0, rows, ws);
                   if (!run(ws, vendor::r_16f, k, xs, vendor::r_16f, k, rows, y.row<float>(0) + r0))
                       return PIB_ERR_DEVICE;
               }
               return PIB_OK;
           }) == PIB_OK;
}

void release_blas(context& c) {
    if (c.blas != nullptr)
        static_cast<void>(vendor_library().fn<vendor::destroy_fn>(vendor::destroy)(
            static_cast<vendor::handle>(c.blas)));
    static_cast<void>(cudaFree(c.blas_stage));
    c.blas = nullptr;
    c.blas_stage = nullptr;
    c.blas_stage_bytes = 0;
}

} // namespace pi::gpu
