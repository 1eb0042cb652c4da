#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "platform/parallel.hpp"

using namespace pi::platform;

namespace {

// How often each index of [0, n) was visited by parallel_for with `grain`, on `threads` threads.
std::vector<int> visits(int threads, int64_t n, int64_t grain) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    task_arena arena(threads);
    arena.execute([&] {
        parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
            CHECK(begin < end);
            for (int64_t i = begin; i < end; ++i)
                seen[static_cast<size_t>(i)].fetch_add(1);
        });
    });
    std::vector<int> out;
    for (auto& s : seen)
        out.push_back(s.load());
    return out;
}

} // namespace

TEST_CASE("every index is visited exactly once, whatever the threads and the grain") {
    for (int threads : {1, 2, 3, 8})
        for (int64_t n : {1, 2, 7, 100, 10007})
            for (int64_t grain : {1, 3, 64, 20000}) {
                CAPTURE(threads);
                CAPTURE(n);
                CAPTURE(grain);
                CHECK(visits(threads, n, grain) == std::vector<int>(static_cast<size_t>(n), 1));
            }
}

TEST_CASE("an empty range calls nothing") {
    task_arena arena(4);
    int calls = 0;
    arena.execute([&] { parallel_for(5, 5, 1, [&](int64_t, int64_t) { ++calls; }); });
    CHECK(calls == 0);
}

TEST_CASE("an arena has the threads it was asked for") {
    CHECK(task_arena(3).max_concurrency() == 3);
    CHECK(default_concurrency() >= 1);
}

#if defined(POWERINFER_THREADING_POOL)
// The pool's workers belong to its arena; oneTBB's are shared by the process and may be busy
// elsewhere, so only the pool promises this.
TEST_CASE("the pool runs a loop on more than one thread") {
    task_arena arena(4);
    std::atomic<int> inside{0}, most{0};
    arena.execute([&] {
        parallel_for(0, 64, 1, [&](int64_t, int64_t) {
            const int now = inside.fetch_add(1) + 1;
            for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);)
                ;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            inside.fetch_sub(1);
        });
    });
    CHECK(most.load() > 1);
}
#endif

TEST_CASE("a nested loop covers its range") {
    task_arena arena(3);
    std::atomic<int64_t> sum{0};
    arena.execute([&] {
        parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i)
                parallel_for(0, 100, 7, [&](int64_t b2, int64_t e2) {
                    for (int64_t j = b2; j < e2; ++j)
                        sum.fetch_add(j);
                });
        });
    });
    CHECK(sum.load() == 8 * 4950);
}

TEST_CASE("an exception in a piece reaches the caller, and the arena still works") {
    task_arena arena(4);
    CHECK_THROWS_AS(arena.execute([&] {
        parallel_for(0, 1000, 1, [](int64_t b, int64_t e) {
            if (b <= 500 && 500 < e) throw std::runtime_error("piece 500");
        });
    }),
                    std::runtime_error);
    CHECK(visits(4, 1000, 1) == std::vector<int>(1000, 1));
}

TEST_CASE("each thread gets its own per_thread value") {
    per_thread<std::vector<int64_t>> scratch;
    task_arena arena(4);
    std::atomic<bool> clash{false};
    arena.execute([&] {
        parallel_for(0, 2000, 1, [&](int64_t b, int64_t e) {
            std::vector<int64_t>& mine = scratch.local();
            for (int64_t i = b; i < e; ++i) {
                mine.assign(16, i);
                std::this_thread::yield();
                for (int64_t v : mine)
                    if (v != i) clash.store(true);
            }
        });
    });
    CHECK_FALSE(clash.load());
}

TEST_CASE("the threading layer is the one CMake chose") {
    const std::string chosen = PI_EXPECTED_THREADING; // POWERINFER_THREADING: tbb or pool
    CHECK(std::string(threading_layer) == (chosen == "pool" ? "the library's own pool" : "oneTBB"));
}
