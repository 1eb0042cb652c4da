#include "bandwidth.hpp"

#include <algorithm>
#include <cstdint>
#include <latch>
#include <memory>
#include <new>
#include <span>
#include <thread>
#include <vector>

#include "tool.h"

namespace pi::bench {

namespace {

// 64-bit integer adds in independent accumulators: the compiler turns this into packed adds
// with no loop-carried latency chain, so the loop runs as fast as memory delivers data. Integer
// addition is associative, so no fast-math is needed for the vectoriser to reorder it.
uint64_t sum_words(std::span<const uint64_t> words) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const size_t n = words.size();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += words[i];
        s1 += words[i + 1];
        s2 += words[i + 2];
        s3 += words[i + 3];
    }
    for (; i < n; ++i)
        s0 += words[i];
    return s0 + s1 + s2 + s3;
}

std::span<uint64_t> share(std::span<uint64_t> all, int part, int parts) {
    const size_t begin = all.size() * static_cast<size_t>(part) / static_cast<size_t>(parts);
    const size_t end = all.size() * static_cast<size_t>(part + 1) / static_cast<size_t>(parts);
    return all.subspan(begin, end - begin);
}

// Runs job(part) on `threads` threads released together; returns the time from the first
// thread starting to the last one finishing. Each thread reads the clock itself: the thread
// that releases the others may run its share before the waiting ones wake up.
template <class Job> double timed_parallel(int threads, Job job) {
    std::vector<double> starts(static_cast<size_t>(threads));
    std::vector<double> ends(static_cast<size_t>(threads));
    std::latch start(threads);
    {
        std::vector<std::jthread> workers;
        workers.reserve(static_cast<size_t>(threads));
        for (int t = 0; t < threads; ++t)
            workers.emplace_back([&, t] {
                start.arrive_and_wait();
                starts[static_cast<size_t>(t)] = tool_seconds();
                job(t);
                ends[static_cast<size_t>(t)] = tool_seconds();
            });
    }
    return *std::max_element(ends.begin(), ends.end()) -
           *std::min_element(starts.begin(), starts.end());
}

} // namespace

bool measure_read_bandwidth(int threads, size_t buffer_bytes, int min_passes, double min_seconds,
                            bandwidth_result& out) {
    const size_t n_words = buffer_bytes / sizeof(uint64_t);
    std::unique_ptr<uint64_t[]> storage;
    try {
        storage = std::make_unique_for_overwrite<uint64_t[]>(n_words);
    } catch (const std::bad_alloc&) {
        return false;
    }
    const std::span<uint64_t> buffer(storage.get(), n_words);

    // Each thread first touches the pages it will read, so they are resident (and local to it
    // on NUMA machines) before timing starts; non-zero values keep them from being shared zero
    // pages.
    timed_parallel(threads, [&](int t) {
        std::span<uint64_t> mine = share(buffer, t, threads);
        for (size_t i = 0; i < mine.size(); ++i)
            mine[i] = i | 1;
    });

    std::vector<uint64_t> sums(static_cast<size_t>(threads));
    double best = 0;
    double elapsed = 0;
    int passes = 0;
    while (passes < max_passes && (passes < min_passes || elapsed < min_seconds)) {
        const double seconds = timed_parallel(threads, [&](int t) {
            sums[static_cast<size_t>(t)] = sum_words(share(buffer, t, threads));
        });
        ++passes;
        elapsed += seconds;
        if (seconds > 0)
            best = std::max(best, static_cast<double>(n_words * sizeof(uint64_t)) / seconds);
    }
    out.checksum = 0;
    for (uint64_t s : sums)
        out.checksum += s;
    out.bytes_per_second = best;
    out.buffer_bytes = n_words * sizeof(uint64_t);
    out.passes = passes;
    out.probes = 1;
    out.threads = threads;
    return true;
}

void keep_best(bandwidth_result& into, const bandwidth_result& later) {
    into.bytes_per_second = std::max(into.bytes_per_second, later.bytes_per_second);
    into.passes += later.passes;
    into.probes += later.probes;
    into.checksum += later.checksum;
}

} // namespace pi::bench
