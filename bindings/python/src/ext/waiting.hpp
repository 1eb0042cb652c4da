#pragma once
// Waiting for a worker thread without blocking Ctrl-C: the GIL is released while waiting, and
// the waiting thread wakes every few milliseconds to run Python's signal handlers.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace pi::python {

// Waits until ready() (checked under m). If a signal handler raises (KeyboardInterrupt), calls
// cancel() until finished() holds and re-raises. While *cancel_requested is set (ctx.cancel()
// from another thread) cancel() is repeated on every wake-up too: a request that lands before
// the worker's C call starts is cleared by that call. Needs the GIL.
void wait_interruptibly(std::mutex& m, std::condition_variable& cv,
                        const std::function<bool()>& ready, const std::function<bool()>& finished,
                        const std::function<void()>& cancel,
                        const std::atomic<bool>& cancel_requested);

// Calls cancel() until finished() holds, with the GIL released.
void cancel_and_wait(std::mutex& m, std::condition_variable& cv,
                     const std::function<bool()>& finished, const std::function<void()>& cancel);

} // namespace pi::python
