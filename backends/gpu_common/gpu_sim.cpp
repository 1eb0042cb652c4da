// The fiber scheduler and runtime calls of the GPU simulation (gpu_sim.hpp).
#include "gpu_sim.hpp"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define PI_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PI_SIM_ASAN 1
#endif
#endif
#ifdef PI_SIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

struct sim_graph {
    struct node {
        const void* kernel;
        std::function<void()> run;
    };
    std::vector<node> nodes;
};
struct sim_stream {
    sim_graph* capture = nullptr; // the graph being captured, if any
};
struct sim_event {};

namespace pi::gpu::sim {

namespace {

constexpr std::size_t stack_bytes = std::size_t{256} << 10;
constexpr unsigned max_threads = 1024;
constexpr unsigned group_width = 32;
constexpr std::size_t memory_bytes = std::size_t{1} << 30; // what device_info reports

enum class state { ready, block_barrier, group_barrier, done };

struct fiber {
    ucontext_t ctx{};
    std::unique_ptr<char[]> stack;
    state st = state::done;
    void* fake_stack = nullptr; // ASan's bookkeeping while the fiber is switched out
};

struct scheduler {
    std::mutex launch;
    ucontext_t main{};
    void* main_fake_stack = nullptr;
    const void* main_bottom = nullptr;
    std::size_t main_size = 0;
    std::vector<fiber> fibers;
    unsigned current = 0;
    void (*body)(void*) = nullptr;
    void* arg = nullptr;
    float exchange[max_threads] = {};
};

scheduler& sched() {
    static scheduler s;
    return s;
}

// ASan must be told about every stack switch, or it reports the fibers' frames as overflows.
void before_switch(void** fake, const void* bottom, std::size_t size) {
#ifdef PI_SIM_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    static_cast<void>(fake);
    static_cast<void>(bottom);
    static_cast<void>(size);
#endif
}

void after_switch(void* fake, const void** bottom, std::size_t* size) {
#ifdef PI_SIM_ASAN
    __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
    static_cast<void>(fake);
    static_cast<void>(bottom);
    static_cast<void>(size);
#endif
}

void fiber_main() {
    scheduler& s = sched();
    after_switch(nullptr, &s.main_bottom, &s.main_size);
    s.body(s.arg);
    s.fibers[s.current].st = state::done;
    before_switch(nullptr, s.main_bottom, s.main_size); // this fiber's stack is finished
    // Returning resumes uc_link, the scheduler.
}

// From a fiber: wait in `st` until the scheduler releases it.
void wait(state st) {
    scheduler& s = sched();
    fiber& f = s.fibers[s.current];
    f.st = st;
    before_switch(&f.fake_stack, s.main_bottom, s.main_size);
    swapcontext(&f.ctx, &s.main);
    after_switch(f.fake_stack, &s.main_bottom, &s.main_size);
}

void resume(scheduler& s, unsigned i) {
    s.current = i;
    threadIdx = uint3{i, 0, 0};
    fiber& f = s.fibers[i];
    before_switch(&s.main_fake_stack, f.stack.get(), stack_bytes);
    swapcontext(&s.main, &f.ctx);
    after_switch(s.main_fake_stack, nullptr, nullptr);
}

[[noreturn]] void deadlock() {
    std::fprintf(stderr,
                 "gpusim: the threads of block (%u, %u, %u) wait at different barriers; "
                 "this kernel would hang on a GPU\n",
                 blockIdx.x, blockIdx.y, blockIdx.z);
    std::abort();
}

// Lets waiting fibers go: everyone at a block barrier, or whole groups at a group barrier.
void release(scheduler& s, unsigned n) {
    unsigned live = 0, at_block = 0;
    for (unsigned i = 0; i < n; ++i) {
        live += s.fibers[i].st != state::done ? 1 : 0;
        at_block += s.fibers[i].st == state::block_barrier ? 1 : 0;
    }
    if (at_block == live) {
        for (unsigned i = 0; i < n; ++i)
            if (s.fibers[i].st == state::block_barrier) s.fibers[i].st = state::ready;
        return;
    }
    bool released = false;
    for (unsigned g = 0; g < n; g += group_width) {
        const unsigned end = g + group_width < n ? g + group_width : n;
        bool all = true, any = false;
        for (unsigned i = g; i < end; ++i) {
            if (s.fibers[i].st == state::done) continue;
            any = true;
            all = all && s.fibers[i].st == state::group_barrier;
        }
        if (!any || !all) continue;
        for (unsigned i = g; i < end; ++i)
            if (s.fibers[i].st == state::group_barrier) s.fibers[i].st = state::ready;
        released = true;
    }
    if (!released) deadlock();
}

void run_block(scheduler& s, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
        fiber& f = s.fibers[i];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.get();
        f.ctx.uc_stack.ss_size = stack_bytes;
        f.ctx.uc_link = &s.main;
        makecontext(&f.ctx, fiber_main, 0);
        f.st = state::ready;
    }
    for (;;) {
        bool live = false;
        for (unsigned i = 0; i < n; ++i) {
            if (s.fibers[i].st == state::ready) resume(s, i);
            live = live || s.fibers[i].st != state::done;
        }
        if (!live) return;
        release(s, n);
    }
}

} // namespace

float group_sum(float v) {
    scheduler& s = sched();
    const unsigned base = threadIdx.x / group_width * group_width;
    const unsigned lane = threadIdx.x - base;
    s.exchange[threadIdx.x] = v;
    wait(state::group_barrier);
    float part[group_width];
    for (unsigned l = 0; l < group_width; ++l)
        part[l] = s.exchange[base + l];
    wait(state::group_barrier); // nobody overwrites a value before every lane has read it
    for (unsigned mask = group_width / 2; mask > 0; mask /= 2) {
        float next[group_width];
        for (unsigned l = 0; l < group_width; ++l)
            next[l] = part[l] + part[l ^ mask];
        std::memcpy(part, next, sizeof part);
    }
    return part[lane];
}

void group_sync() {
    wait(state::group_barrier);
}

bool capturing(cudaStream_t s) {
    return s != nullptr && s->capture != nullptr;
}

void capture(cudaStream_t s, const void* kernel, std::function<void()> run) {
    s->capture->nodes.push_back({kernel, std::move(run)});
}

void run_grid(dim3 grid, dim3 block, void (*body)(void*), void* arg) {
    scheduler& s = sched();
    const std::lock_guard lock(s.launch);
    if (block.x == 0 || block.x > max_threads || block.y != 1 || block.z != 1) {
        std::fprintf(stderr, "gpusim: unsupported block shape (%u, %u, %u)\n", block.x, block.y,
                     block.z);
        std::abort();
    }
    while (s.fibers.size() < block.x) {
        s.fibers.emplace_back();
        s.fibers.back().stack = std::make_unique<char[]>(stack_bytes);
    }
    s.body = body;
    s.arg = arg;
    blockDim = block;
    gridDim = grid;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = uint3{x, y, z};
                run_block(s, block.x);
            }
}

} // namespace pi::gpu::sim

void __syncthreads() {
    pi::gpu::sim::wait(pi::gpu::sim::state::block_barrier);
}

cudaError_t cudaGetDeviceCount(int* n) {
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    std::snprintf(prop->name, sizeof prop->name, "GPU kernels simulated on the CPU");
    prop->multiProcessorCount = 4;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total) {
    *free_bytes = pi::gpu::sim::memory_bytes;
    *total = pi::gpu::sim::memory_bytes;
    return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void*) {
    attr->maxThreadsPerBlock = static_cast<int>(pi::gpu::sim::max_threads);
    return cudaSuccess;
}

cudaError_t cudaGetLastError() {
    return cudaSuccess;
}

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    default:
        return "simulated runtime error";
    }
}

// Device allocations start on 256 bytes, as cudaMalloc's do.
cudaError_t cudaMalloc(void** p, std::size_t n) {
    *p = ::operator new (n == 0 ? 1 : n, std::align_val_t{256}, std::nothrow);
    return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void* p) {
    if (p != nullptr) ::operator delete (p, std::align_val_t{256});
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, std::size_t n) {
    return cudaMalloc(p, n);
}

cudaError_t cudaFreeHost(void* p) {
    return cudaFree(p);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind,
                            cudaStream_t s) {
    if (pi::gpu::sim::capturing(s)) return cudaErrorStreamCaptureUnsupported;
    if (n > 0) std::memcpy(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t s) {
    if (pi::gpu::sim::capturing(s)) return cudaErrorStreamCaptureUnsupported;
    if (n > 0) std::memset(p, value, n);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
    *s = new (std::nothrow) sim_stream;
    return *s != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (s != nullptr) delete s->capture;
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    return pi::gpu::sim::capturing(s) ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    *e = new (std::nothrow) sim_event;
    return *e != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t s) {
    return pi::gpu::sim::capturing(s) ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t, unsigned) {
    return pi::gpu::sim::capturing(s) ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
    if (s == nullptr || s->capture != nullptr) return cudaErrorStreamCaptureUnsupported;
    s->capture = new (std::nothrow) sim_graph;
    return s->capture != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
    *graph = nullptr;
    if (!pi::gpu::sim::capturing(s)) return cudaErrorInvalidValue;
    *graph = std::exchange(s->capture, nullptr);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
    *exec = graph != nullptr ? new (std::nothrow) sim_graph(*graph) : nullptr;
    if (graph == nullptr) return cudaErrorInvalidValue;
    return *exec != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo* info) {
    if (exec == nullptr || graph == nullptr) return cudaErrorInvalidValue;
    bool same = exec->nodes.size() == graph->nodes.size();
    for (std::size_t i = 0; same && i < graph->nodes.size(); ++i)
        same = exec->nodes[i].kernel == graph->nodes[i].kernel;
    if (info != nullptr) info->result = same ? 0 : 1;
    if (!same) return cudaErrorGraphExecUpdateFailure;
    exec->nodes = graph->nodes;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (exec == nullptr) return cudaErrorInvalidValue;
    if (pi::gpu::sim::capturing(s)) return cudaErrorStreamCaptureUnsupported;
    for (const sim_graph::node& n : exec->nodes)
        n.run();
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}
