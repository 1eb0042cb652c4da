#pragma once
// The dense float matrices the construction builds its weights in.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "synthetic/random.hpp"

namespace pi::synth {

// Row-major; a row is one ggml row (ne0 = cols), so W·x is one dot product per row.
struct matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<float> data;

    matrix() = default;
    matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}

    float* row(int64_t i) { return data.data() + i * cols; }
    const float* row(int64_t i) const { return data.data() + i * cols; }
    float& at(int64_t i, int64_t j) { return data[static_cast<size_t>(i * cols + j)]; }
    float at(int64_t i, int64_t j) const { return data[static_cast<size_t>(i * cols + j)]; }

    void scale(float s);
    void zero_column(int64_t j);
};

matrix gaussian(int64_t rows, int64_t cols, double stddev, rng r);
matrix rademacher(int64_t rows, int64_t cols, rng r); // entries ±1
matrix transpose(const matrix& m);
float dot(const float* a, const float* b, int64_t n);
// y[t] = w · x[t] for every row t of x.
matrix project(const matrix& x, const matrix& w);
// RMS over the entries of columns first_col.. (1 leaves out the constant channel 0).
double rms(const matrix& m, int64_t first_col = 0);
// The factor that gives `out` (without the constant channel 0) the RMS `target`.
float scale_to_rms(const matrix& out, double target);
// An FFN block's contribution to the residual: sum over neurons i of activation[t][i] ·
// down_t row i, for every token t.
matrix ffn_output(const matrix& activation, const matrix& down_t);
// x rounded to the nearest F16 value, as F32.
float round_f16(double x);

} // namespace pi::synth
