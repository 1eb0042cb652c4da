#pragma once

#include <span>
#include <vector>

namespace pi::bench {

// Distribution of repeated measurements (e.g. tokens/s of each repetition).
struct summary {
    std::vector<double> samples;
    double median = 0;
    double mean = 0;
    double stddev = 0; // sample standard deviation; 0 for a single sample
    double min = 0;
    double max = 0;
};

summary summarize(std::span<const double> samples);

} // namespace pi::bench
