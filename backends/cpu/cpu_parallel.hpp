#pragma once
// Parallel loops of the CPU kernels, run inside the backend's arena. Each index (or block) is
// handled by exactly one task, so results never depend on the thread count. A loop that would be
// a single task runs on the calling thread: decode issues hundreds of small kernels per token,
// and entering the arena would cost more than they do.
#include "cpu_context.hpp"
#include "tsan_handoff.hpp"

#include "platform/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <tuple>
#include <utility>

namespace pi::cpu {

// Runs loop(bodies...) inside c's arena, each body wrapped so that ThreadSanitizer sees the
// loop's edges (tsan_handoff.hpp); without TSan the wrappers only forward. The wrappers exist
// before the caller announces the loop: the tasks read them in place, after acquiring the edge,
// so nothing the tasks read may be written after that.
template <class Loop, class... Bodies>
void run_tasks(context& c, Loop&& loop, const Bodies&... bodies) {
    tsan_handoff h;
    tsan_handoff::publish();
    c.run([&] {
        tsan_handoff::enter_task(); // the arena may run this on one of its own threads
        const auto announced = [&h](const auto& body) {
            return [&h, &body](auto&&... args) -> decltype(auto) {
                tsan_handoff::enter_task(); // before the captures are read
                struct leave_at_exit {
                    tsan_handoff& h;
                    ~leave_at_exit() { h.leave_task(); }
                } leave{h};
                return body(std::forward<decltype(args)>(args)...);
            };
        };
        const std::tuple wrapped{announced(bodies)...};
        tsan_handoff::publish();
        std::apply(loop, wrapped);
        h.leave_task();
    });
    h.collect();
}

// f(begin, end) over [0, n) in chunks of at least `grain` indices.
template <class F> void parallel_1d(context& c, int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    if (n <= grain) return f(int64_t{0}, n);
    run_tasks(
        c, [&](const auto& body) { platform::parallel_for(0, n, grain, body); },
        [&](int64_t begin, int64_t end) { f(begin, end); });
}

// f(row, col_begin, col_end) over the rows x cols grid, columns in chunks of at most
// `col_grain`: one loop over the (row, column chunk) tiles.
template <class F>
void parallel_2d(context& c, int64_t rows, int64_t cols, int64_t col_grain, F&& f) {
    if (rows <= 0 || cols <= 0) return;
    if (rows == 1 && cols <= col_grain) return f(int64_t{0}, int64_t{0}, cols);
    const int64_t grain = std::max<int64_t>(col_grain, 1);
    const int64_t col_chunks = (cols + grain - 1) / grain;
    run_tasks(
        c, [&](const auto& body) { platform::parallel_for(0, rows * col_chunks, 1, body); },
        [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t) {
                const int64_t col = t % col_chunks * grain;
                f(t / col_chunks, col, std::min(cols, col + grain));
            }
        });
}

// The largest f(i) over [0, n), or `none` when n <= 0. The maximum is the same whichever task
// sees which index first.
template <class F> int64_t parallel_max(context& c, int64_t n, int64_t none, F&& f) {
    if (n == 1) return std::max(none, f(int64_t{0}));
    std::atomic<int64_t> result{none};
    run_tasks(
        c, [&](const auto& body) { platform::parallel_for(0, n, 1, body); },
        [&](int64_t begin, int64_t end) {
            int64_t m = none;
            for (int64_t i = begin; i < end; ++i)
                m = std::max(m, f(i));
            for (int64_t seen = result.load(); m > seen && !result.compare_exchange_weak(seen, m);)
                ;
        });
    return result.load();
}

// f(begin, end) for the chunks [0, chunk), [chunk, 2 chunk), ... of [0, n). The chunks also
// bound the working set of a task, so each task visits its chunks in order, chunk by chunk,
// even on one thread.
template <class F> void parallel_chunks(context& c, int64_t n, int64_t chunk, F&& f) {
    if (n <= 0) return;
    const int64_t n_chunks = (n + chunk - 1) / chunk;
    auto one = [&](int64_t i) { f(i * chunk, std::min(n, (i + 1) * chunk)); };
    if (n_chunks == 1 || c.n_threads == 1) {
        for (int64_t i = 0; i < n_chunks; ++i)
            one(i);
        return;
    }
    run_tasks(
        c, [&](const auto& body) { platform::parallel_for(0, n_chunks, 1, body); },
        [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i)
                one(i);
        });
}

// A chunk size splitting n items into about `per_thread` chunks per thread: at least min_chunk
// (enough work to amortise a task), at most max_chunk (a working set that fits a cache), and a
// multiple of `align`.
inline int64_t chunk_size(const context& c, int64_t n, int64_t min_chunk, int64_t max_chunk,
                          int64_t align, int64_t per_thread = 4) {
    const int64_t parts = per_thread * c.n_threads;
    int64_t chunk = std::clamp((n + parts - 1) / parts, std::max<int64_t>(min_chunk, 1),
                               std::max<int64_t>(max_chunk, std::max<int64_t>(min_chunk, 1)));
    chunk = (chunk + align - 1) / align * align;
    return chunk;
}

} // namespace pi::cpu
