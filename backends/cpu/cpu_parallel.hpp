#pragma once
// Parallel loops of the CPU kernels, always run inside the backend's arena. Each index (or
// block) is handled by exactly one task, so results never depend on the thread count.
#include "cpu_context.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/blocked_range2d.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <cstdint>

namespace pi::cpu {

// f(begin, end) over [0, n) in chunks of at least `grain` indices.
template <class F> void parallel_1d(context& c, int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    c.run([&] {
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                          [&](const tbb::blocked_range<int64_t>& r) { f(r.begin(), r.end()); });
    });
}

// f(row, col_begin, col_end) over the rows x cols grid, columns in chunks of `col_grain`.
template <class F>
void parallel_2d(context& c, int64_t rows, int64_t cols, int64_t col_grain, F&& f) {
    if (rows <= 0 || cols <= 0) return;
    c.run([&] {
        tbb::parallel_for(tbb::blocked_range2d<int64_t>(0, rows, 1, 0, cols, col_grain),
                          [&](const tbb::blocked_range2d<int64_t>& r) {
                              for (int64_t i = r.rows().begin(); i < r.rows().end(); ++i)
                                  f(i, r.cols().begin(), r.cols().end());
                          });
    });
}

// The largest f(i) over [0, n), or `none` when n <= 0.
template <class F> int64_t parallel_max(context& c, int64_t n, int64_t none, F&& f) {
    int64_t result = none;
    c.run([&] {
        result = tbb::parallel_reduce(
            tbb::blocked_range<int64_t>(0, n), none,
            [&](const tbb::blocked_range<int64_t>& r, int64_t m) {
                for (int64_t i = r.begin(); i < r.end(); ++i) {
                    const int64_t v = f(i);
                    if (v > m) m = v;
                }
                return m;
            },
            [](int64_t a, int64_t b) { return a > b ? a : b; });
    });
    return result;
}

} // namespace pi::cpu
