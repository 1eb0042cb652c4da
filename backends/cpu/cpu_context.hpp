#pragma once
// The state behind the CPU backend's void* ctx and the definition of its buffers.
#include "cpu_simd.hpp"
#include "pib_backend.h"

#include "platform/buffers.hpp"
#include "platform/parallel.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace pi::cpu {

struct context;

// Every buffer starts on this boundary so that SIMD kernels may use aligned loads.
inline constexpr std::size_t buffer_alignment = 64;

struct context {
    std::size_t capacity = 0;
    bool capacity_is_ram = false; // free memory then comes from the OS, not from `used`
    std::atomic<std::size_t> used{0};
    int32_t n_threads = 1;
    std::optional<platform::task_arena> arena;
    // The fast kernels, or null for the scalar reference kernels; `name` tells which.
    const simd_kernels* simd = nullptr;
    const char* name = "cpu (scalar)";
    // Per-thread attention scratch (scores of one head, then the weighted V sum); grows only
    // when n_kv or head_dim grows, so steady-state calls do not allocate.
    platform::per_thread<std::vector<double>> attention_scratch;
    // The batched sparse kernels' per-token lists regrouped per neuron (fast_matmul.cpp). They
    // only grow, so steady-state calls do not allocate; a backend instance runs one kernel at a
    // time, so one set serves every call.
    std::vector<int32_t> neuron_offsets, neuron_cursor, neuron_tokens;
    std::vector<float> neuron_coefs;
    std::vector<float> axpy_scratch; // one axpy_batch_scratch per column chunk
    std::vector<double> rope_freq;   // rope's pair frequencies
    // The activations of a quantized product prepared for its weight type (prepare_q), one row
    // of blocks per token, and their scales; grow only, like the lists above.
    std::vector<cache_line> quant_x;

    // Runs f inside this backend's arena so that parallel loops use exactly n_threads threads.
    template <class F> void run(F&& f) { arena->execute(std::forward<F>(f)); }
};

// v's storage for at least n elements: scratch that only grows, so that steady-state calls do
// not allocate.
template <class T> T* grown(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

inline context* as_context(void* ctx) noexcept {
    return static_cast<context*>(ctx);
}

} // namespace pi::cpu

struct pib_buffer {
    std::byte* data = nullptr;
    std::size_t size = 0;
    pi::cpu::context* owner = nullptr; // the context charged for `storage`; null when wrapped
    pi::platform::buffer storage;      // empty for buffers that wrap host memory
};
