#pragma once
// The fallback of parallel.hpp where oneTBB is missing (the mingw-w64 build): a fixed set of
// worker threads per arena (named pi-pool-1, pi-pool-2, ..., thread_name.hpp) that, with the
// calling thread, take the pieces of one loop at a time.
// A loop inside a worker (nested) runs on that worker alone.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pi::platform {

int default_concurrency();

class thread_pool {
  public:
    // n_threads - 1 workers: the caller of run() is the n-th thread.
    explicit thread_pool(int n_threads);
    ~thread_pool();
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;

    int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

    // task(context, i) for every i in [0, n_tasks), on the workers and the calling thread;
    // returns when all have returned and rethrows the first exception one threw. One loop at a
    // time: a second caller waits for the first.
    void run(int64_t n_tasks, void (*task)(const void* context, int64_t i), const void* context);

    // The pool whose task_arena::execute the calling thread is inside, or null.
    static thread_pool* current() noexcept;
    static void set_current(thread_pool* pool) noexcept;

  private:
    struct job;
    void work_loop();
    static void work(job& j) noexcept;

    std::vector<std::thread> workers_;
    std::mutex run_mutex_; // one loop at a time
    std::mutex mutex_;     // guards the fields below
    std::condition_variable wake_, left_;
    job* job_ = nullptr;
    uint64_t generation_ = 0;
    int active_ = 0; // workers inside the current job
    bool stop_ = false;
};

class task_arena {
  public:
    explicit task_arena(int n_threads) : pool_(n_threads > 0 ? n_threads : default_concurrency()) {}
    int max_concurrency() const noexcept { return pool_.size(); }

    template <class F> void execute(F&& f) {
        struct restore {
            thread_pool* previous;
            ~restore() { thread_pool::set_current(previous); }
        } at_exit{thread_pool::current()};
        thread_pool::set_current(&pool_);
        std::forward<F>(f)();
    }

  private:
    thread_pool pool_;
};

template <class Body>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Body& body) {
    if (begin >= end) return;
    if (grain < 1) grain = 1;
    const int64_t n = end - begin;
    thread_pool* pool = thread_pool::current();
    if (pool == nullptr || pool->size() == 1 || n <= grain) return body(begin, end);
    // About four pieces per thread balance uneven pieces; never shorter than the grain.
    const int64_t parts = int64_t{4} * pool->size();
    const int64_t piece = std::max(grain, (n + parts - 1) / parts);
    struct loop {
        const Body& body;
        int64_t begin, end, piece;
    } const l{body, begin, end, piece};
    pool->run((n + piece - 1) / piece,
              [](const void* context, int64_t i) {
                  const loop& l = *static_cast<const loop*>(context);
                  const int64_t b = l.begin + i * l.piece;
                  l.body(b, std::min(l.end, b + l.piece));
              },
              &l);
}

template <class T> class per_thread {
  public:
    T& local() {
        std::lock_guard lock(mutex_);
        std::unique_ptr<T>& slot = values_[std::this_thread::get_id()];
        if (!slot) slot = std::make_unique<T>();
        return *slot;
    }

  private:
    std::mutex mutex_;
    std::unordered_map<std::thread::id, std::unique_ptr<T>> values_;
};

} // namespace pi::platform
