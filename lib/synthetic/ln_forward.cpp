#include "synthetic/ln_forward.hpp"

#include <algorithm>
#include <cmath>

#include "synthetic/construction.hpp"

namespace pi::synth {
namespace {

// Rotates every head of every row of m in place, row t being at position t % length.
void rope_neox(matrix& m, int64_t head_dim, double base) {
    const int64_t half = head_dim / 2;
    for (int64_t t = 0; t < m.rows; ++t) {
        const auto pos = static_cast<double>(t % calibration_length);
        for (int64_t h0 = 0; h0 < m.cols; h0 += head_dim) {
            float* x = m.row(t) + h0;
            for (int64_t j = 0; j < half; ++j) {
                const double theta = pos * std::pow(base, -2.0 * static_cast<double>(j) /
                                                              static_cast<double>(head_dim));
                const double c = std::cos(theta);
                const double s = std::sin(theta);
                const double a = x[j];
                const double b = x[j + half];
                x[j] = static_cast<float>(a * c - b * s);
                x[j + half] = static_cast<float>(a * s + b * c);
            }
        }
    }
}

} // namespace

std::vector<double> row_deviation(const matrix& x, double eps) {
    std::vector<double> dev(static_cast<size_t>(x.rows));
    const auto n = static_cast<double>(x.cols);
    for (int64_t t = 0; t < x.rows; ++t) {
        double sum = 0.0;
        double sum2 = 0.0;
        for (int64_t j = 0; j < x.cols; ++j) {
            sum += x.at(t, j);
            sum2 += static_cast<double>(x.at(t, j)) * x.at(t, j);
        }
        const double mean = sum / n;
        dev[static_cast<size_t>(t)] = std::sqrt(std::max(0.0, sum2 / n - mean * mean) + eps);
    }
    return dev;
}

matrix layer_norm(const matrix& x, const norm_params& n, double eps) {
    const std::vector<double> dev = row_deviation(x, eps);
    matrix y(x.rows, x.cols);
    for (int64_t t = 0; t < x.rows; ++t) {
        double mean = 0.0;
        for (int64_t j = 0; j < x.cols; ++j)
            mean += x.at(t, j);
        mean /= static_cast<double>(x.cols);
        for (int64_t j = 0; j < x.cols; ++j) {
            const auto k = static_cast<size_t>(j);
            y.at(t, j) = static_cast<float>(
                (x.at(t, j) - mean) / dev[static_cast<size_t>(t)] * n.weight[k] + n.bias[k]);
        }
    }
    return y;
}

matrix linear(const matrix& x, const matrix& w, std::span<const float> b) {
    matrix y = project(x, w);
    if (!b.empty())
        for (int64_t t = 0; t < y.rows; ++t)
            for (int64_t j = 0; j < y.cols; ++j)
                y.at(t, j) += b[static_cast<size_t>(j)];
    return y;
}

matrix causal_attention(const matrix& q_in, const matrix& k_in, const matrix& v, const geometry& g,
                        bool neox_rope, double rope_base) {
    matrix q = q_in;
    matrix k = k_in;
    if (neox_rope) {
        rope_neox(q, g.head_dim, rope_base);
        rope_neox(k, g.head_dim, rope_base);
    }
    const int64_t group = g.n_head / g.n_head_kv;
    const double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(g.head_dim));
    matrix out(q.rows, g.n_embd);
    std::vector<double> w(static_cast<size_t>(calibration_length));
    for (int64_t t = 0; t < q.rows; ++t) {
        const int64_t first = t - t % calibration_length; // the sequence's first row
        for (int64_t hq = 0; hq < g.n_head; ++hq) {
            const int64_t kv = (hq / group) * g.head_dim;
            const float* qh = q.row(t) + hq * g.head_dim;
            double top = -INFINITY;
            for (int64_t s = first; s <= t; ++s) {
                const double score = dot(qh, k.row(s) + kv, g.head_dim) * inv_sqrt;
                w[static_cast<size_t>(s - first)] = score;
                top = std::max(top, score);
            }
            double total = 0.0;
            for (int64_t s = first; s <= t; ++s)
                total += (w[static_cast<size_t>(s - first)] =
                              std::exp(w[static_cast<size_t>(s - first)] - top));
            float* o = out.row(t) + hq * g.head_dim;
            for (int64_t s = first; s <= t; ++s) {
                const double p = w[static_cast<size_t>(s - first)] / total;
                const float* vh = v.row(s) + kv;
                for (int64_t j = 0; j < g.head_dim; ++j)
                    o[j] += static_cast<float>(p * vh[j]);
            }
        }
    }
    return out;
}

} // namespace pi::synth
