#pragma once
// The vendor-mapping header: the kernel sources are written once against the CUDA runtime API;
// compiled by hipcc (PI_GPU_HIP), the names used here map to their HIP equivalents. Compiled by
// a host compiler (PI_GPU_SIM), gpu_sim.hpp runs every block's threads as fibers on the CPU, so
// the conformance suite checks the kernels' logic on machines without a GPU. Also the few device
// primitives whose spelling differs (warp shuffles) and the kernel launch.
#if defined(PI_GPU_SIM)
#include "gpu_sim.hpp"

#define PI_GPU_KIND "gpusim"
#define PI_GPU_VENDOR "GPU simulation"
#elif defined(PI_GPU_HIP)
#include <hip/hip_runtime.h>

#define cudaDeviceProp hipDeviceProp_t
#define cudaError_t hipError_t
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraph_t hipGraph_t
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaFree hipFree
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDestroy hipEventDestroy
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventRecord hipEventRecord
#define cudaEvent_t hipEvent_t
#define cudaFreeHost hipHostFree
#define cudaMalloc hipMalloc
#define cudaMallocHost hipHostMalloc
#define cudaMemGetInfo hipMemGetInfo
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemsetAsync hipMemsetAsync
#define cudaSetDevice hipSetDevice
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess

#define PI_GPU_KIND "hip"
#define PI_GPU_VENDOR "HIP"
#else
#include <cuda_runtime.h>

#define PI_GPU_KIND "cuda"
#define PI_GPU_VENDOR "CUDA"
#endif

#include "gpu_math.hpp"

// The build names the targets the module is compiled for (a string literal), for the reason
// given when a GPU has none of them.
#ifndef PI_GPU_ARCHITECTURES
#error "the build defines PI_GPU_ARCHITECTURES"
#endif

namespace pi::gpu {

// Kernels reduce over groups of 32 lanes. That is a whole warp on NVIDIA and half a wavefront
// on wave64 AMD parts; shuffles with width 32 stay inside the group on both.
inline constexpr int group = 32;

#if !defined(PI_GPU_SIM)
__device__ __forceinline__ float shfl_xor(float v, int mask) {
#if defined(PI_GPU_HIP)
    return __shfl_xor(v, mask, group);
#else
    return __shfl_xor_sync(0xffffffffu, v, mask, group);
#endif
}
#endif

// The sum of v over the 32 lanes of the calling group, in every lane; all 32 lanes must call.
// A butterfly: each step adds two partial sums in either order, so every lane ends with the
// same bits.
__device__ __forceinline__ float group_sum(float v) {
#if defined(PI_GPU_SIM)
    return sim::group_sum(v);
#else
    for (int mask = group / 2; mask > 0; mask /= 2)
        v += shfl_xor(v, mask);
    return v;
#endif
}

// Orders the shared-memory accesses of the calling group: what any of its lanes wrote before the
// call, every lane sees after it, and what they read before it, no lane overwrites before the
// call. All 32 lanes must call.
__device__ __forceinline__ void group_sync() {
#if defined(PI_GPU_SIM)
    sim::group_sync();
#elif defined(PI_GPU_HIP)
    // A group lies inside one wavefront, whose lanes run in lockstep (HIP 5.2 has no
    // __syncwarp): the fences order the LDS accesses, the wave barrier keeps the compiler from
    // moving them across.
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#else
    __syncwarp();
#endif
}

// The sum of v over the block, in every thread. blockDim.x is a multiple of 32 and at most
// 1024; `shared` holds blockDim.x / 32 floats. Partial sums are added in group order.
__device__ __forceinline__ float block_sum(float v, float* shared) {
    v = group_sum(v);
    __syncthreads(); // a previous call may still be reading `shared`
    if (threadIdx.x % group == 0) shared[threadIdx.x / group] = v;
    __syncthreads();
    float s = 0.0f;
    for (unsigned g = 0; g < blockDim.x / group; ++g)
        s += shared[g];
    return s;
}

// kernel<<<grid, block, 0, stream>>>(args...), or its simulation. Kernels go through
// gpu_graph.hpp's launch(context&, ...), which records them in a graph session; this is for the
// launches that must not wait for a submission (the BLAS path's conversions) and for submitting.
template <class... P, class... A>
void launch_now(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t stream, A... args) {
#if defined(PI_GPU_SIM)
    sim::launch(kernel, grid, block, stream, args...);
#else
    kernel<<<grid, block, 0, stream>>>(args...);
#endif
}

// Grid dimensions y and z are limited to 65535.
inline constexpr int64_t max_grid_yz = 65535;

// Grid of `threads`-wide blocks over the columns of `rows` rows; rows past the y limit are
// covered by a grid-stride loop in the kernel.
inline dim3 grid_2d(int64_t cols, int64_t rows, int threads) {
    const int64_t y = rows < max_grid_yz ? rows : max_grid_yz;
    return dim3(static_cast<unsigned>((cols + threads - 1) / threads), static_cast<unsigned>(y));
}

} // namespace pi::gpu
