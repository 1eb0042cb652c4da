#pragma once
// A CPU stand-in for the part of the CUDA runtime the GPU kernels use (PI_GPU_SIM). The kernel
// sources compile unchanged with a host compiler: device memory is host memory, streams run
// each call at once, and a launch runs every block in turn, its threads as fibers that switch
// at __syncthreads, group_sync and the exchange of a group sum (gpu_sim.cpp). It exists so that
// the conformance suite checks the kernels' indexing, scans, reductions and fault reporting on
// machines without a GPU; it says nothing about their speed. One launch runs at a time.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// Blocks run one after the other, so one copy per kernel serves every block.
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};

// The built-in variables of the simulated thread that runs now.
inline thread_local uint3 threadIdx{};
inline thread_local uint3 blockIdx{};
inline thread_local dim3 blockDim{};
inline thread_local dim3 gridDim{};

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInsufficientDriver = 35,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoDevice = 100,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorGraphExecUpdateFailure = 910,
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
struct sim_stream;
using cudaStream_t = sim_stream*;
inline constexpr unsigned cudaStreamNonBlocking = 1;
// Every call runs at once, so an event is always complete and waiting on one is a no-op.
struct sim_event;
using cudaEvent_t = sim_event*;
inline constexpr unsigned cudaEventDisableTiming = 2;

// A captured stream's launches become the nodes of a graph; an executable graph runs them in
// order. Only kernels are captured: any other call on a capturing stream fails, as the calls a
// capture cannot hold do on a GPU, so the suite catches a submission that would break one.
struct sim_graph;
using cudaGraph_t = sim_graph*;
using cudaGraphExec_t = sim_graph*;
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
struct cudaGraphExecUpdateResultInfo {
    int result;
};

struct cudaFuncAttributes {
    int maxThreadsPerBlock;
};

struct cudaDeviceProp {
    char name[256];
    int multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* kernel);
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void** p, std::size_t n);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, std::size_t n);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags);
// Succeeds when the graphs have the same kernels in the same order (grids may differ), as the
// CUDA runtime's update of kernel nodes does.
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo* info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

void __syncthreads();

namespace pi::gpu::sim {

// The butterfly sum of v over this thread's group of 32 (gpu_runtime.hpp's group_sum), with the
// same additions in the same order as the shuffles on a GPU, at the cost of one exchange.
float group_sum(float v);

// Waits until every live thread of this thread's group has called it (gpu_runtime.hpp's
// group_sync).
void group_sync();

// Runs body(arg) as every thread (threadIdx.x < block.x) of every block of the grid.
void run_grid(dim3 grid, dim3 block, void (*body)(void*), void* arg);

// Whether s is capturing, and adding a launch to its graph.
bool capturing(cudaStream_t s);
void capture(cudaStream_t s, const void* kernel, std::function<void()> run);

template <class... P>
void run_kernel(void (*kernel)(P...), dim3 grid, dim3 block, std::tuple<P...>& params) {
    struct call {
        void (*kernel)(P...);
        std::tuple<P...>* params;
    } c{kernel, &params};
    run_grid(
        grid, block,
        [](void* a) {
            const call* c = static_cast<const call*>(a);
            std::apply(c->kernel, *c->params); // every thread gets its own copy of the arguments
        },
        &c);
}

template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t stream, A... args) {
    std::tuple<P...> params(args...);
    if (capturing(stream))
        capture(
            stream, reinterpret_cast<const void*>(kernel),
            [kernel, grid, block, params]() mutable { run_kernel(kernel, grid, block, params); });
    else
        run_kernel(kernel, grid, block, params);
}

} // namespace pi::gpu::sim
