#pragma once
// The two happens-before edges the parallel loops rely on, spelled out for ThreadSanitizer.
// Debian's oneTBB is not instrumented, so TSan cannot see how its scheduler hands a task to a
// worker or how the caller learns that the tasks are done; it would report every loop. The loops
// announce instead: what the caller wrote before a loop happens-before each task of it, and what
// each task wrote happens-before the loop returns. Sibling tasks stay unordered, so two tasks
// touching the same data are still reported (docs/sanitizers.md). Elsewhere these compile to
// nothing.
#if defined(__SANITIZE_THREAD__)
#define PI_CPU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PI_CPU_TSAN 1
#endif
#endif

#if defined(PI_CPU_TSAN)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace pi::cpu {

// One loop's two edges. The edge to the tasks is one sync object for the whole process: a task
// acquires it before it reads anything of its loop's (even the address of the loop's handoff is
// the caller's data), so its address cannot come from the loop. Loops of other threads thereby
// order their tasks after more than they need, which can hide a race between two loops, never
// report a false one. The edge back is the loop's own.
class tsan_handoff {
  public:
    // The caller, before it starts the tasks.
    static void publish() noexcept { release(&to_tasks); }
    // A task, first thing.
    static void enter_task() noexcept { acquire(&to_tasks); }
    // A task, last thing.
    void leave_task() noexcept { release(&to_caller_); }
    // The caller, once every task is done.
    void collect() noexcept { acquire(&to_caller_); }

  private:
    static void release(char* addr) noexcept {
#if defined(PI_CPU_TSAN)
        __tsan_release(addr);
#else
        (void)addr;
#endif
    }
    static void acquire(char* addr) noexcept {
#if defined(PI_CPU_TSAN)
        __tsan_acquire(addr);
#else
        (void)addr;
#endif
    }
    static inline char to_tasks = 0;
    char to_caller_ = 0;
};

} // namespace pi::cpu
