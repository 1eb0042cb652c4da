#pragma once
// The few hipBLAS entry points the HIP module calls, as function-pointer types with the C API's
// types of the ROCm 5 releases (hipblas.h), so that the module resolves them from libhipblas at
// run time and never links it. The module links libamdhip64.so.5, the ROCm 5 runtime, so it tries
// ROCm 5's libraries only: libhipblas.so.1 (ROCm 5.6, 5.7) and libhipblas.so.0 (5.0 to 5.5).
// Their hipblasGemmEx takes hipblasDatatype_t for the data and the compute type; ROCm 6
// (libhipblas.so.2) deprecates that type and ROCm 7 (.so.3) gives the same symbol hipDataType
// arguments, whose values differ, so a later library must not be taken for these. Debian's HIP
// 5.2 has no hipblas.h to check the values against: they are ROCm 5's hipblas.h. The enums are
// int-sized.
#include <cstddef>

namespace pi::gpu::hipblas {

using handle = struct opaque_handle*;    // hipblasHandle_t
using status = int;                      // hipblasStatus_t
inline constexpr status success = 0;     // HIPBLAS_STATUS_SUCCESS
inline constexpr int op_n = 111;         // HIPBLAS_OP_N
inline constexpr int op_t = 112;         // HIPBLAS_OP_T
inline constexpr int r_16f = 150;        // HIPBLAS_R_16F
inline constexpr int r_32f = 151;        // HIPBLAS_R_32F
inline constexpr int compute_32f = 151;  // HIPBLAS_R_32F as the compute type: float sums
inline constexpr int gemm_default = 160; // HIPBLAS_GEMM_DEFAULT

using create_fn = status (*)(handle*);                  // hipblasCreate
using destroy_fn = status (*)(handle);                  // hipblasDestroy
using set_stream_fn = status (*)(handle, void* stream); // hipblasSetStream
// hipblasGemmEx: C = alpha op(A) op(B) + beta C, column-major, in cublasGemmEx's argument order;
// alpha and beta are floats with a float compute type.
using gemm_ex_fn = status (*)(handle, int transa, int transb, int m, int n, int k,
                              const void* alpha, const void* a, int a_type, int lda, const void* b,
                              int b_type, int ldb, const void* beta, void* c, int c_type, int ldc,
                              int compute_type, int algo);

// Indices into the loader's entry points (gpu_blas_loader.hpp), in the order of `symbols`.
enum entry : int { create, destroy, set_stream, gemm_ex };
inline constexpr const char* symbols[] = {"hipblasCreate", "hipblasDestroy", "hipblasSetStream",
                                          "hipblasGemmEx"};

inline constexpr const char* vendor_name = "hipBLAS";
// The libraries to try, newest first.
inline constexpr const char* library_names[] = {"libhipblas.so.1", "libhipblas.so.0"};

// ROCm 5's hipBLAS has no version call: the description names the library's file instead.
inline bool version_text(void* const*, char*, std::size_t) {
    return false;
}

} // namespace pi::gpu::hipblas
