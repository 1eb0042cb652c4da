#pragma once
// A batch's kernels as graphs (pib_vtable version 6; README.md here, "Graph sessions", and
// docs/hybrid.md, "Decode as graphs"). Between graph_begin and graph_end, launch() records each
// kernel (its function, grid, block and the bytes of its arguments) instead of launching it; the
// next call that is not a kernel submits the run recorded so far. A run equal to one that made a
// graph at its place in the session is launched as that graph; a run of the same kernels updates
// it; other kernels make a new one. Launch cost is then paid once per run, not once per kernel,
// and a decode step whose arguments do not change is not even captured again.
#include "gpu_runtime.hpp"
#include "pib_backend.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

namespace pi::gpu {

// The recorded kernels of one run: per kernel, its submit function and where its record
// starts in `bytes`. A record is the kernel's address, grid, block, then each argument's bytes,
// in order. Equal records launch the same kernels with the same arguments, so equal bytes
// mean the graph made from them may be launched again as it is.
class kernel_run {
  public:
    template <class... P, class... A>
    void add(void (*kernel)(P...), dim3 grid, dim3 block, A... args) {
        static_assert((std::is_trivially_copyable_v<P> && ...),
                      "a recorded argument is copied as bytes");
        kernels_.push_back({&submit<P...>, bytes_.size()});
        addresses_.push_back(reinterpret_cast<const void*>(kernel));
        put(kernel);
        put_dim(grid);
        put_dim(block);
        const std::tuple<P...> params(args...);
        std::apply([this](const P&... p) { (put(p), ...); }, params);
    }

    bool empty() const noexcept { return kernels_.empty(); }
    std::size_t size() const noexcept { return kernels_.size(); }
    const std::vector<unsigned char>& bytes() const noexcept { return bytes_; }
    // The kernels in order: a graph of the same ones can take this run's arguments.
    const std::vector<const void*>& kernels() const noexcept { return addresses_; }
    // Hands the record to a graph made from it (leaves this run's record unspecified).
    void give_record(std::vector<unsigned char>& bytes, std::vector<const void*>& kernels) {
        bytes_.swap(bytes);
        addresses_.swap(kernels);
    }
    // Launches every recorded kernel on `stream`, in order (directly, or into a capture).
    void submit_all(cudaStream_t stream) const {
        for (const recorded& k : kernels_)
            k.submit(bytes_.data() + k.offset, stream);
    }
    void clear() noexcept {
        kernels_.clear();
        bytes_.clear();
        addresses_.clear();
    }

  private:
    struct recorded {
        void (*submit)(const unsigned char* record, cudaStream_t stream);
        std::size_t offset;
    };

    // An empty argument (a stateless functor) has no bytes that mean anything.
    template <class T> void put(const T& v) {
        if constexpr (!std::is_empty_v<T>) {
            const auto* p = reinterpret_cast<const unsigned char*>(&v);
            bytes_.insert(bytes_.end(), p, p + sizeof(T));
        }
    }
    void put_dim(dim3 d) {
        const unsigned xyz[3] = {d.x, d.y, d.z};
        put(xyz);
    }
    template <class T> static void get(const unsigned char*& at, T& v) {
        if constexpr (!std::is_empty_v<T>) {
            std::memcpy(static_cast<void*>(&v), at, sizeof(T));
            at += sizeof(T);
        }
    }
    static dim3 get_dim(const unsigned char*& at) {
        unsigned xyz[3];
        get(at, xyz);
        return dim3(xyz[0], xyz[1], xyz[2]);
    }
    template <class... P> static void submit(const unsigned char* at, cudaStream_t stream) {
        void (*kernel)(P...) = nullptr;
        get(at, kernel);
        const dim3 grid = get_dim(at), block = get_dim(at);
        std::tuple<P...> params{};
        std::apply([&at](P&... p) { (get(at, p), ...); }, params);
        std::apply([&](const P&... p) { launch_now(kernel, grid, block, stream, p...); }, params);
    }

    std::vector<unsigned char> bytes_;
    std::vector<recorded> kernels_;
    std::vector<const void*> addresses_;
};

// A graph made at one place of a session, with the record of the run it was made from.
struct graph_variant {
    cudaGraphExec_t exec = nullptr;
    std::vector<unsigned char> bytes;
    std::vector<const void*> kernels;
    uint64_t last_used = 0;
};

// The graphs of one place. Batches of different sizes take different kernels there (a decoded
// token's mat-vec differs from two tokens'), so a few are kept, the least recently used
// replaced, and a server alternating batch sizes does not make a graph per batch.
struct graph_slot {
    static constexpr std::size_t max_variants = 4;
    std::vector<graph_variant> variants;
};

struct graph_state {
    bool recording = false;
    kernel_run run;
    std::vector<graph_slot> slots;
    std::size_t next_slot = 0; // the place of the next run in this batch
    uint64_t clock = 0;        // counts submitted graphs, for graph_variant::last_used
    pib_graph_stats stats{};
};

} // namespace pi::gpu
