#pragma once

#include <cstddef>
#include <cstdint>

namespace pi::bench {

struct bandwidth_result {
    double bytes_per_second = 0; // best pass
    size_t buffer_bytes = 0;
    int passes = 0;
    int probes = 0;
    int threads = 0;
    uint64_t checksum = 0; // sum of the buffer; handed out so the reads cannot be optimised away
};

// Memory read bandwidth with `threads` threads each summing its share of a buffer of
// `buffer_bytes` (which should be far larger than the last-level cache): the best of timed
// passes, at least `min_passes` of them and more until `min_seconds` have passed (at most
// max_passes). The best pass is the one least disturbed by other processes. Returns false when
// the buffer cannot be allocated.
bool measure_read_bandwidth(int threads, size_t buffer_bytes, int min_passes, double min_seconds,
                            bandwidth_result& out);

inline constexpr int max_passes = 64;

// Folds a later probe of the same machine into `into`: the best bandwidth of both.
void keep_best(bandwidth_result& into, const bandwidth_result& later);

} // namespace pi::bench
