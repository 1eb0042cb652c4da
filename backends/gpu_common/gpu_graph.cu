// Graph sessions (pib_vtable version 6, gpu_graph.hpp): submitting a recorded run as a graph,
// replayed, updated or made anew, and the vtable's graph entries.
#include "gpu_graph.hpp"
#include "gpu_kernels.hpp"

#include <cstdlib>
#include <cstring>

namespace pi::gpu {

namespace {

// A run of one kernel gains nothing from a graph: it is launched as itself.
constexpr std::size_t min_graph_kernels = 2;

// POWERINFER_GPU_GRAPHS=0 launches every kernel as it is called, for comparison and as a way
// out should a driver mishandle graphs. Read per session, so that a process can compare both.
bool graphs_enabled() {
    const char* v = std::getenv("POWERINFER_GPU_GRAPHS");
    return v == nullptr || std::strcmp(v, "0") != 0;
}

cudaError_t instantiate(cudaGraphExec_t* exec, cudaGraph_t graph) {
#if defined(PI_GPU_HIP)
    return hipGraphInstantiateWithFlags(exec, graph, 0);
#else
    return cudaGraphInstantiate(exec, graph, 0);
#endif
}

// Gives `exec` the nodes' parameters of `graph`, which must have the same kernels in the same
// order; an error leaves `exec` as it was.
cudaError_t update(cudaGraphExec_t exec, cudaGraph_t graph) {
#if defined(PI_GPU_HIP)
    hipGraphNode_t error_node = nullptr;
    hipGraphExecUpdateResult result{};
    return hipGraphExecUpdate(exec, graph, &error_node, &result);
#else
    cudaGraphExecUpdateResultInfo info{};
    return cudaGraphExecUpdate(exec, graph, &info);
#endif
}

// The run's launches, captured on the context's stream instead of running. The capture always
// ends, so that the stream takes work again whatever failed.
cudaError_t capture(context& c, cudaGraph_t* graph) {
    *graph = nullptr;
    if (const cudaError_t e = cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal);
        e != cudaSuccess)
        return e;
    c.graphs.run.submit_all(c.stream);
    const cudaError_t launched = cudaGetLastError();
    const cudaError_t ended = cudaStreamEndCapture(c.stream, graph);
    if (launched == cudaSuccess && ended == cudaSuccess) return cudaSuccess;
    if (*graph != nullptr) static_cast<void>(cudaGraphDestroy(*graph));
    *graph = nullptr;
    return launched != cudaSuccess ? launched : ended;
}

void drop(graph_variant& v) {
    if (v.exec != nullptr) static_cast<void>(cudaGraphExecDestroy(v.exec));
    v.exec = nullptr;
    v.bytes.clear();
    v.kernels.clear();
}

// The variant of the slot the run is submitted as: the one made from an equal run (launched
// as it is), else one of the same kernels (updated), else a free or the least recently used
// one (made anew).
int submit_graph(context& c, graph_slot& slot) {
    graph_state& g = c.graphs;
    const kernel_run& run = g.run;
    ++g.clock;
    for (graph_variant& v : slot.variants)
        if (v.exec != nullptr && v.bytes == run.bytes()) {
            v.last_used = g.clock;
            ++g.stats.graphs_replayed;
            return status_of(cudaGraphLaunch(v.exec, c.stream));
        }
    graph_variant* target = nullptr;
    for (graph_variant& v : slot.variants)
        if (v.exec != nullptr && v.kernels == run.kernels()) target = &v;
    if (target == nullptr) {
        if (slot.variants.size() < graph_slot::max_variants) {
            target = &slot.variants.emplace_back();
        } else {
            target = &slot.variants.front();
            for (graph_variant& v : slot.variants)
                if (v.last_used < target->last_used) target = &v;
            drop(*target);
        }
    }
    cudaGraph_t graph = nullptr;
    if (const cudaError_t e = capture(c, &graph); e != cudaSuccess) {
        drop(*target);
        return status_of(e);
    }
    const bool updated = target->exec != nullptr && update(target->exec, graph) == cudaSuccess;
    cudaError_t e = cudaSuccess;
    if (!updated) {
        static_cast<void>(cudaGetLastError()); // a refused update is no kernel's failure
        drop(*target);
        e = instantiate(&target->exec, graph);
        if (e != cudaSuccess) target->exec = nullptr;
    }
    static_cast<void>(cudaGraphDestroy(graph));
    if (e != cudaSuccess) {
        drop(*target);
        return status_of(e);
    }
    g.run.give_record(target->bytes, target->kernels);
    target->last_used = g.clock;
    ++(updated ? g.stats.graphs_updated : g.stats.graphs_created);
    return status_of(cudaGraphLaunch(target->exec, c.stream));
}

} // namespace

int submit_recorded(context& c) {
    graph_state& g = c.graphs;
    if (g.run.empty()) return PIB_OK;
    g.stats.kernels += g.run.size();
    int s = PIB_OK;
    if (g.run.size() < min_graph_kernels) {
        g.run.submit_all(c.stream);
        g.stats.launches += g.run.size();
        s = launch_status();
    } else {
        if (g.next_slot == g.slots.size()) g.slots.emplace_back();
        s = submit_graph(c, g.slots[g.next_slot++]);
        ++g.stats.launches;
    }
    g.run.clear();
    return s;
}

int graph_begin(context& c) {
    if (c.graphs.recording) return PIB_ERR_INVALID_ARGUMENT;
    c.graphs.recording = graphs_enabled();
    c.graphs.next_slot = 0;
    return PIB_OK;
}

int graph_end(context& c) {
    const int s = submit_recorded(c);
    c.graphs.recording = false;
    return s;
}

int graph_stats(context& c, pib_graph_stats* out) {
    if (out == nullptr) return PIB_ERR_INVALID_ARGUMENT;
    *out = c.graphs.stats;
    return PIB_OK;
}

void release_graphs(context& c) {
    for (graph_slot& slot : c.graphs.slots)
        for (graph_variant& v : slot.variants)
            drop(v);
    c.graphs.slots.clear();
    c.graphs.run.clear();
}

} // namespace pi::gpu
