#pragma once
// The few cuBLAS entry points the CUDA module calls, as function-pointer types with the
// documented C API's types (cublas_api.h, library_types.h), so that the module resolves them
// from libcublas at run time and never links it. gpu_blas.cu checks these values against the
// toolkit's headers where it has them. The C API's enums are int-sized and passed as int by the
// platform's C calling convention, so they are ints here.
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace pi::gpu::cublas {

using handle = struct opaque_handle*;                      // cublasHandle_t
using status = int;                                        // cublasStatus_t
inline constexpr status success = 0;                       // CUBLAS_STATUS_SUCCESS
inline constexpr int op_n = 0, op_t = 1;                   // cublasOperation_t
inline constexpr int r_32f = 0, r_16f = 2;                 // cudaDataType
inline constexpr int compute_32f = 68;                     // CUBLAS_COMPUTE_32F
inline constexpr int gemm_default = -1;                    // CUBLAS_GEMM_DEFAULT
inline constexpr int major_version = 0, minor_version = 1; // libraryPropertyType

using create_fn = status (*)(handle*);                        // cublasCreate_v2
using destroy_fn = status (*)(handle);                        // cublasDestroy_v2
using set_stream_fn = status (*)(handle, void* stream);       // cublasSetStream_v2
using get_property_fn = status (*)(int property, int* value); // cublasGetProperty
// cublasGemmEx: C = alpha op(A) op(B) + beta C, column-major; alpha and beta are floats with
// compute_32f.
using gemm_ex_fn = status (*)(handle, int transa, int transb, int m, int n, int k,
                              const void* alpha, const void* a, int a_type, int lda, const void* b,
                              int b_type, int ldb, const void* beta, void* c, int c_type, int ldc,
                              int compute_type, int algo);

// Indices into the loader's entry points (gpu_blas_loader.hpp), in the order of `symbols`.
enum entry : int { create, destroy, set_stream, get_property, gemm_ex };
inline constexpr const char* symbols[] = {"cublasCreate_v2", "cublasDestroy_v2",
                                          "cublasSetStream_v2", "cublasGetProperty",
                                          "cublasGemmEx"};

inline constexpr const char* vendor_name = "cuBLAS";
// The libraries to try, newest first.
inline constexpr const char* library_names[] = {"libcublas.so.13", "libcublas.so.12"};

// "cuBLAS 13.1" from the library's get-property entry; false when it gives no version.
inline bool version_text(void* const* entries, char* out, std::size_t size) {
    const auto property = reinterpret_cast<get_property_fn>(entries[get_property]);
    int major = 0, minor = 0;
    if (property(major_version, &major) != success || property(minor_version, &minor) != success)
        return false;
    std::snprintf(out, size, "%s %d.%d", vendor_name, major, minor);
    return true;
}

} // namespace pi::gpu::cublas
