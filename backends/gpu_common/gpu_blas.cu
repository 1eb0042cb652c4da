// Prompt products through cuBLAS, found at run time (gpu_blas.hpp). The module links neither
// cuBLAS nor its headers' functions: it dlopens libcublas on first need and resolves five
// entry points (cublas_entry.hpp). The HIP module and the simulation have no BLAS path and say
// so in the device description.
#include "gpu_blas.hpp"
#include "gpu_blas_loader.hpp"

#include <cstdio>
#include <cstdlib>

#if !defined(PI_GPU_HIP) && !defined(PI_GPU_SIM)
#include "cublas_entry.hpp"
#include "gpu_dispatch.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <iterator>

#if __has_include(<cublas_api.h>)
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
#endif

namespace pi::gpu {

namespace {

constexpr const char* switch_name = "POWERINFER_GPU_BLAS";

} // namespace

#if defined(PI_GPU_HIP) || defined(PI_GPU_SIM)

const char* gemm_path() {
#if defined(PI_GPU_SIM)
    constexpr const char* no_library = "the GPU simulation has no BLAS library";
#else
    constexpr const char* no_library = "hipBLAS is not used (HIP 5.2 as packaged by Debian has "
                                       "no hipblas headers)";
#endif
    static const struct text {
        char s[192];
    } path = [&] {
        text t{};
        std::snprintf(t.s, sizeof t.s, "own tiled kernels: %s",
                      blas::switched_off(std::getenv(switch_name)) ? "POWERINFER_GPU_BLAS=0"
                                                                   : no_library);
        return t;
    }();
    return path.s;
}

bool blas_mul_mat(context&, const view&, const view&, const view&) {
    return false;
}

void release_blas(context&) {}

#else

namespace {

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
    blas::loaded<std::size(cublas::symbols)> found;
    char path[192] = {};

    template <class F> F fn(cublas::entry e) const { return reinterpret_cast<F>(found.entry[e]); }
};

// Looked for once per process. It stays loaded: contexts hold its handles until they are
// destroyed, and unloading cuBLAS is not worth the bookkeeping.
const library& cublas_library() {
    static const library lib = [] {
        library l;
        static constexpr const char* names[] = {"libcublas.so.13", "libcublas.so.12"};
        l.found = blas::load(std::getenv(switch_name), names, cublas::symbols,
                             blas::system_calls{open_library, find_symbol, close_library});
        if (!l.found.ok()) {
            std::snprintf(l.path, sizeof l.path, "own tiled kernels: %s", l.found.why);
            return l;
        }
        const auto property = l.fn<cublas::get_property_fn>(cublas::get_property);
        int major = 0, minor = 0;
        if (property(cublas::major_version, &major) == cublas::success &&
            property(cublas::minor_version, &minor) == cublas::success)
            std::snprintf(l.path, sizeof l.path, "cuBLAS %d.%d", major, minor);
        else
            std::snprintf(l.path, sizeof l.path, "cuBLAS (%s)", l.found.name);
        return l;
    }();
    return lib;
}

// Weights of a quantized type are dequantized a slab of rows at a time, at most this many
// bytes of binary16.
constexpr std::size_t slab_bytes = std::size_t{32} << 20;
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
    launch(to_half_kernel<W>, dim3(blocks_for(rows * v.ne0, convert_threads)), convert_threads,
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

cublas::handle handle_of(context& c, const library& lib) {
    if (c.blas == nullptr && !c.blas_failed) {
        cublas::handle h = nullptr;
        if (lib.fn<cublas::create_fn>(cublas::create)(&h) != cublas::success) {
            c.blas_failed = true;
            return nullptr;
        }
        c.blas = h;
        if (lib.fn<cublas::set_stream_fn>(cublas::set_stream)(h, c.stream) != cublas::success)
            c.blas_failed = true;
    }
    return c.blas_failed ? nullptr : static_cast<cublas::handle>(c.blas);
}

} // namespace

const char* gemm_path() {
    return cublas_library().path;
}

bool blas_mul_mat(context& c, const view& w, const view& x, const view& y) {
    const library& lib = cublas_library();
    if (!lib.found.ok()) return false;
    const int64_t k = w.ne0, m = w.ne1, n = x.ne1;
    const int64_t ldx = leading(x, sizeof(float)), ldy = leading(y, sizeof(float));
    if (!fits_int(k) || !fits_int(m) || !fits_int(n) || !fits_int(ldx) || !fits_int(ldy) ||
        x.nb1 % sizeof(float) != 0 || y.nb1 % sizeof(float) != 0)
        return false;
    const bool f32 = w.is(type_f32), f16 = w.is(type_f16);
    if (!f32 && !f16 && !w.is(type_q4_0) && !w.is(type_q8_0)) return false;
    const cublas::handle h = handle_of(c, lib);
    if (h == nullptr) return false;
    const auto gemm = lib.fn<cublas::gemm_ex_fn>(cublas::gemm_ex);
    const float one = 1.0f, zero = 0.0f;
    // Row-major y[t][r] = w[r] . x[t] is, column-major, Y (m x n) = W^T (m x k) X (k x n).
    const auto run = [&](const void* a, int a_type, int64_t lda, const void* b, int b_type,
                         int64_t ldb, int64_t rows, float* out) {
        return gemm(h, cublas::op_t, cublas::op_n, static_cast<int>(rows), static_cast<int>(n),
                    static_cast<int>(k), &one, a, a_type, static_cast<int>(lda), b, b_type,
                    static_cast<int>(ldb), &zero, out, cublas::r_32f, static_cast<int>(ldy),
                    cublas::compute_32f, cublas::gemm_default) == cublas::success;
    };
    if (f32) {
        const int64_t ldw = leading(w, sizeof(float));
        if (!fits_int(ldw) || w.nb1 % sizeof(float) != 0) return false;
        return run(w.base, cublas::r_32f, ldw, x.base, cublas::r_32f, ldx, m, y.row<float>(0));
    }
    // cuBLAS multiplies binary16 only by binary16: x goes over as binary16 too, the products
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
        return run(w.base, cublas::r_16f, ldw, xs, cublas::r_16f, k, m, y.row<float>(0));
    }
    uint16_t* ws = xs + n * k;
    return with_weight_elements(w.type, [&]<class W>(W) {
               for (int64_t r0 = 0; r0 < m; r0 += slab) {
                   const int64_t rows = std::min(slab, m - r0);
                   to_half<W>(c, w, r0, rows, ws);
                   if (!run(ws, cublas::r_16f, k, xs, cublas::r_16f, k, rows, y.row<float>(0) + r0))
                       return PIB_ERR_DEVICE;
               }
               return PIB_OK;
           }) == PIB_OK;
}

void release_blas(context& c) {
    if (c.blas != nullptr)
        static_cast<void>(cublas_library().fn<cublas::destroy_fn>(cublas::destroy)(
            static_cast<cublas::handle>(c.blas)));
    static_cast<void>(cudaFree(c.blas_stage));
    c.blas = nullptr;
    c.blas_stage = nullptr;
    c.blas_stage_bytes = 0;
}

#endif

} // namespace pi::gpu
