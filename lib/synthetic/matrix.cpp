#include "synthetic/matrix.hpp"

#include <array>
#include <cmath>

#include "quant/types.hpp"

namespace pi::synth {

void matrix::scale(float s) {
    for (float& v : data)
        v *= s;
}

void matrix::zero_column(int64_t j) {
    for (int64_t i = 0; i < rows; ++i)
        at(i, j) = 0.0f;
}

matrix gaussian(int64_t rows, int64_t cols, double stddev, rng r) {
    matrix m(rows, cols);
    for (float& v : m.data)
        v = static_cast<float>(stddev * r.normal());
    return m;
}

matrix rademacher(int64_t rows, int64_t cols, rng r) {
    matrix m(rows, cols);
    for (float& v : m.data)
        v = r.sign();
    return m;
}

matrix transpose(const matrix& m) {
    matrix t(m.cols, m.rows);
    for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t j = 0; j < m.cols; ++j)
            t.at(j, i) = m.at(i, j);
    return t;
}

float dot(const float* a, const float* b, int64_t n) {
    // Eight partial sums let the compiler vectorise without reassociating a single sum.
    std::array<float, 8> acc{};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int64_t k = 0; k < 8; ++k)
            acc[static_cast<size_t>(k)] += a[i + k] * b[i + k];
    float sum = 0.0f;
    for (float v : acc)
        sum += v;
    for (; i < n; ++i)
        sum += a[i] * b[i];
    return sum;
}

matrix project(const matrix& x, const matrix& w) {
    matrix y(x.rows, w.rows);
    for (int64_t r = 0; r < w.rows; ++r)
        for (int64_t t = 0; t < x.rows; ++t)
            y.at(t, r) = dot(w.row(r), x.row(t), w.cols);
    return y;
}

double rms(const matrix& m, int64_t first_col) {
    double sum = 0.0;
    for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t j = first_col; j < m.cols; ++j)
            sum += static_cast<double>(m.at(i, j)) * m.at(i, j);
    const auto n = static_cast<double>(m.rows * (m.cols - first_col));
    return n > 0.0 ? std::sqrt(sum / n) : 0.0;
}

float scale_to_rms(const matrix& out, double target) {
    const double rms = synth::rms(out, 1);
    return static_cast<float>(rms > 0.0 ? target / rms : 1.0);
}

matrix ffn_output(const matrix& activation, const matrix& down_t) {
    matrix out(activation.rows, down_t.cols);
    for (int64_t t = 0; t < activation.rows; ++t) {
        float* y = out.row(t);
        for (int64_t i = 0; i < activation.cols; ++i) {
            const float a = activation.at(t, i);
            if (a == 0.0f) continue; // an inactive neuron adds nothing
            const float* down = down_t.row(i);
            for (int64_t j = 0; j < down_t.cols; ++j)
                y[j] += a * down[j];
        }
    }
    return out;
}

float round_f16(double x) {
    return fp16_to_fp32(fp32_to_fp16(static_cast<float>(x)));
}

} // namespace pi::synth
