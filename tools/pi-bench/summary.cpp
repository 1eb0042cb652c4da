#include "summary.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pi::bench {

summary summarize(std::span<const double> samples) {
    summary s;
    s.samples.assign(samples.begin(), samples.end());
    if (samples.empty()) return s;
    std::vector<double> sorted = s.samples;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    s.min = sorted.front();
    s.max = sorted.back();
    s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
    if (n > 1) {
        double squares = 0;
        for (double v : sorted)
            squares += (v - s.mean) * (v - s.mean);
        s.stddev = std::sqrt(squares / static_cast<double>(n - 1));
    }
    return s;
}

} // namespace pi::bench
