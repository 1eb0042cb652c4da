#pragma once
// Prompt-size products through the vendor BLAS loaded at run time (cuBLAS on CUDA), with the
// module's own tiled kernel where it is absent, switched off or refuses (README.md, "Prompts
// through cuBLAS").
#include "gpu_context.hpp"

namespace pi::gpu {

// The GEMM path of prompt products, for the device description: "cuBLAS 13.1" or "own tiled
// kernels: <why>". The library is looked for once per process, at the first call.
const char* gemm_path();

// y = w x through the library; false when the own kernel must compute it instead (no library,
// its handle or a call failed, a type or stride it cannot take). Returns true only when the
// product was submitted on the context's stream.
bool blas_mul_mat(context& c, const view& w, const view& x, const view& y);

// The context's library handle and staging buffer.
void release_blas(context& c);

} // namespace pi::gpu
