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

// One loop's two edges, each a TSan sync object at its own address.
class tsan_handoff {
  public:
    // The caller, before it starts the tasks.
    void publish() noexcept { release(&to_tasks_); }
    // A task, first thing.
    void enter_task() noexcept { acquire(&to_tasks_); }
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
    char to_tasks_ = 0;
    char to_caller_ = 0;
};

} // namespace pi::cpu
