#include "synthetic/firing.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "quant/types.hpp"

namespace pi::synth {
namespace {

constexpr double max_firing_rate = 0.95;
constexpr double max_abs_z = 8.0; // bound on the bias in standard deviations

} // namespace

std::vector<double> firing_rates(int64_t n_ff, double mean_rate, double power_law, rng r) {
    const double cap = std::max(max_firing_rate, mean_rate);
    std::vector<double> shape(static_cast<size_t>(n_ff));
    for (int64_t k = 0; k < n_ff; ++k)
        shape[static_cast<size_t>(k)] = std::pow(static_cast<double>(k + 1), -power_law);
    auto mean_for = [&](double scale) {
        double sum = 0.0;
        for (double s : shape)
            sum += std::min(cap, scale * s);
        return sum / static_cast<double>(n_ff);
    };
    double lo = 0.0;
    double hi = cap / shape.back();
    for (int iter = 0; iter < 200; ++iter) {
        const double mid = 0.5 * (lo + hi);
        (mean_for(mid) < mean_rate ? lo : hi) = mid;
    }
    std::vector<double> rates(shape.size());
    for (size_t k = 0; k < shape.size(); ++k)
        rates[k] = std::min(cap, hi * shape[k]);
    for (size_t k = rates.size(); k > 1; --k)
        std::swap(rates[k - 1], rates[r.below(k)]);
    return rates;
}

// Acklam's rational approximation, relative error 1.2e-9.
double normal_quantile(double p) {
    static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                   -2.759285104469687e+02, 1.383577518672690e+02,
                                   -3.066479806614716e+01, 2.506628277459239e+00};
    static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                   -1.556989798598866e+02, 6.680131188771972e+01,
                                   -1.328068155288572e+01};
    static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                   -2.400758277161838e+00, -2.549732539343734e+00,
                                   4.374664141464968e+00,  2.938163982698783e+00};
    static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                   2.445134137142996e+00, 3.754408661907416e+00};
    constexpr double low = 0.02425;
    if (p <= 0.0) return -max_abs_z;
    if (p >= 1.0) return max_abs_z;
    auto tail = [&](double q) {
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    };
    double z = 0.0;
    if (p < low) {
        z = tail(std::sqrt(-2.0 * std::log(p)));
    } else if (p > 1.0 - low) {
        z = -tail(std::sqrt(-2.0 * std::log(1.0 - p)));
    } else {
        const double q = p - 0.5;
        const double r = q * q;
        z = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
    }
    return std::clamp(z, -max_abs_z, max_abs_z);
}

std::vector<float> gate_biases(const matrix& s, const std::vector<double>& rates, double w0c) {
    std::vector<float> bias(rates.size());
    const auto n = static_cast<double>(s.rows);
    for (int64_t i = 0; i < s.cols; ++i) {
        double sum = 0.0;
        double sum2 = 0.0;
        for (int64_t t = 0; t < s.rows; ++t) {
            sum += s.at(t, i);
            sum2 += static_cast<double>(s.at(t, i)) * s.at(t, i);
        }
        const double mean = sum / n;
        const double stddev = std::sqrt(std::max(0.0, sum2 / n - mean * mean));
        const double z = normal_quantile(1.0 - rates[static_cast<size_t>(i)]);
        bias[static_cast<size_t>(i)] = round_f16(-(mean + stddev * z) / w0c);
    }
    return bias;
}

} // namespace pi::synth
