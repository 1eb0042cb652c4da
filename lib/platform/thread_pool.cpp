#include "platform/thread_pool.hpp"
#include "platform/thread_name.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#if defined(__linux__)
#include <sched.h>
#endif

namespace pi::platform {

namespace {

thread_local thread_pool* t_current = nullptr;

} // namespace

// The CPUs this process may run on, as oneTBB counts them: on Linux the affinity mask (taskset,
// cgroup cpusets), which hardware_concurrency() ignores.
int default_concurrency() {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

struct thread_pool::job {
    void (*task)(const void*, int64_t) = nullptr;
    const void* context = nullptr;
    int64_t n_tasks = 0;
    std::atomic<int64_t> next{0};
    std::mutex error_mutex;
    std::exception_ptr error;
};

thread_pool::thread_pool(int n_threads) {
    workers_.reserve(static_cast<std::size_t>(std::max(0, n_threads - 1)));
    for (int i = 1; i < n_threads; ++i)
        workers_.emplace_back([this, i] {
            name_this_thread("pi-pool-" + std::to_string(i));
            work_loop();
        });
}

thread_pool::~thread_pool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_)
        t.join();
}

thread_pool* thread_pool::current() noexcept {
    return t_current;
}

void thread_pool::set_current(thread_pool* pool) noexcept {
    t_current = pool;
}

void thread_pool::work(job& j) noexcept {
    for (int64_t i; (i = j.next.fetch_add(1, std::memory_order_relaxed)) < j.n_tasks;) {
        try {
            j.task(j.context, i);
        } catch (...) {
            std::lock_guard lock(j.error_mutex);
            if (!j.error) j.error = std::current_exception();
        }
    }
}

// A worker joins only the job that is open when it wakes, so a late waker never runs a piece
// of a job whose caller has returned.
void thread_pool::work_loop() {
    uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || (job_ != nullptr && generation_ != seen); });
        if (stop_) return;
        seen = generation_;
        job* j = job_;
        ++active_;
        lock.unlock();
        work(*j);
        lock.lock();
        if (--active_ == 0) left_.notify_all();
    }
}

void thread_pool::run(int64_t n_tasks, void (*task)(const void*, int64_t), const void* context) {
    if (n_tasks <= 0) return;
    std::lock_guard one_at_a_time(run_mutex_);
    job j;
    j.task = task;
    j.context = context;
    j.n_tasks = n_tasks;
    {
        std::lock_guard lock(mutex_);
        job_ = &j;
        ++generation_;
    }
    wake_.notify_all();
    // Nested loops in the pieces run on this thread alone, as on a worker.
    thread_pool* const outer = t_current;
    t_current = nullptr;
    work(j);
    t_current = outer;
    {
        std::unique_lock lock(mutex_);
        job_ = nullptr; // closed: workers that have not joined yet never will
        left_.wait(lock, [&] { return active_ == 0; });
    }
    if (j.error) std::rethrow_exception(j.error);
}

} // namespace pi::platform
