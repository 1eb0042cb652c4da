#pragma once
// The threads of the CPU backend and the quantizer, behind one interface: oneTBB where CMake
// found it (POWERINFER_THREADING=tbb), else a small pool of our own (=pool, thread_pool.hpp).
//
//   task_arena a(n);                 n threads for the loops run inside a.execute(f)
//   parallel_for(b, e, grain, body)  body(begin, end) over disjoint pieces covering [b, e),
//                                    each at most about `grain` long where grain > 1
//   per_thread<T> t;  t.local()      one T per thread that asks
//   threading_layer                  "oneTBB" or "the library's own pool"
//
// Every index is handled by exactly one call of body, so a loop whose pieces write disjoint
// results computes the same bytes under either scheduler and any thread count.
#if defined(POWERINFER_THREADING_POOL)
#include "platform/thread_pool.hpp"
#else
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <cstdint>
#include <utility>

namespace pi::platform {

// The threads this process should use by default (the affinity mask, cgroup limits).
inline int default_concurrency() {
    return tbb::info::default_concurrency();
}

class task_arena {
  public:
    explicit task_arena(int n_threads) : arena_(n_threads) {}
    int max_concurrency() const { return arena_.max_concurrency(); }
    template <class F> void execute(F&& f) { arena_.execute(std::forward<F>(f)); }

  private:
    tbb::task_arena arena_;
};

template <class Body>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Body& body) {
    if (begin >= end) return;
    tbb::parallel_for(tbb::blocked_range<int64_t>(begin, end, grain > 0 ? grain : 1),
                      [&body](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); });
}

template <class T> class per_thread {
  public:
    T& local() { return values_.local(); }

  private:
    tbb::enumerable_thread_specific<T> values_;
};

} // namespace pi::platform
#endif

namespace pi::platform {

// Which of the two runs the loops, for pi_system_info.
#if defined(POWERINFER_THREADING_POOL)
inline constexpr const char* threading_layer = "the library's own pool";
#else
inline constexpr const char* threading_layer = "oneTBB";
#endif

} // namespace pi::platform
