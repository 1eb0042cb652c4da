#pragma once
// Row access to the weights of the reference matrix kernels and get_rows, one interface for F32,
// F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Quantized blocks are dequantized with lib/quant's
// converters into stack buffers, so every sum sees exactly the floats that a dequantized F32 copy
// of the weights holds, in the same order: a quantized weight gives the same result as the F32
// kernel on its dequantized copy.
#include "cpu_tensor.hpp"
#include "quant/blocks.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace pi::cpu {

// Elements per block of the quantized types below: 32, or qk_k for the K-quants.
inline constexpr int64_t max_quant_block = qk_k;

// Rows of an F32 (W = float) or F16 (W = uint16_t) matrix.
template <class W> class float_rows {
  public:
    explicit float_rows(const view& w) : w_(w) {}

    double dot(int64_t r, const float* x) const { return cpu::dot(w_.row<const W>(r), x, w_.ne0); }
    // acc[j - j0] += coef * w[r][j] for j in [j0, j1).
    void axpy(int64_t r, double coef, int64_t j0, int64_t j1, double* acc) const {
        const W* wr = w_.row<const W>(r);
        for (int64_t j = j0; j < j1; ++j)
            acc[j - j0] += coef * load(wr, j);
    }
    // out[j - j0] = w[r][j] for j in [j0, j1).
    void read(int64_t r, int64_t j0, int64_t j1, float* out) const {
        const W* wr = w_.row<const W>(r);
        for (int64_t j = j0; j < j1; ++j)
            out[j - j0] = load(wr, j);
    }

  private:
    const view& w_;
};

// Rows of a matrix of quantized blocks: Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0 (32 elements), or a
// K-quant (qk_k-element super-blocks).
class quant_rows {
  public:
    explicit quant_rows(const view& w)
        : w_(w), to_float_(traits_of(w.type).to_float), block_bytes_(traits_of(w.type).type_size),
          qk_(traits_of(w.type).block_size) {}

    double dot(int64_t r, const float* x) const {
        double sum = 0.0;
        float buf[max_quant_block];
        for (int64_t b = 0; b < w_.ne0 / qk_; ++b) {
            block(r, b, buf);
            const float* xb = x + b * qk_;
            for (int64_t j = 0; j < qk_; ++j)
                sum += static_cast<double>(buf[j]) * xb[j];
        }
        return sum;
    }
    void axpy(int64_t r, double coef, int64_t j0, int64_t j1, double* acc) const {
        float buf[max_quant_block];
        for_blocks(r, j0, j1, buf, [&](int64_t j, float v) { acc[j - j0] += coef * v; });
    }
    void read(int64_t r, int64_t j0, int64_t j1, float* out) const {
        float buf[max_quant_block];
        for_blocks(r, j0, j1, buf, [&](int64_t j, float v) { out[j - j0] = v; });
    }

  private:
    void block(int64_t r, int64_t b, float* out) const {
        to_float_(w_.row<const std::byte>(r) + static_cast<std::size_t>(b) * block_bytes_, out,
                  qk_);
    }
    // f(j, w[r][j]) for j in [j0, j1) ascending, one dequantized block at a time.
    template <class F> void for_blocks(int64_t r, int64_t j0, int64_t j1, float* buf, F&& f) const {
        for (int64_t j = j0; j < j1;) {
            const int64_t first = j / qk_ * qk_;
            const int64_t end = std::min(first + qk_, j1);
            block(r, first / qk_, buf);
            for (; j < end; ++j)
                f(j, buf[j - first]);
        }
    }

    const view& w_;
    to_float_fn to_float_;
    std::size_t block_bytes_;
    int64_t qk_;
};

// Calls f with the row accessor for w's type: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K or Q6_K; PIB_ERR_UNSUPPORTED for every other type.
template <class F> int with_weight_rows(const view& w, F&& f) {
    switch (static_cast<ggml_type>(w.type)) {
    case ggml_type::f32:
        return f(float_rows<float>(w));
    case ggml_type::f16:
        return f(float_rows<uint16_t>(w));
    case ggml_type::q4_0:
    case ggml_type::q4_1:
    case ggml_type::q5_0:
    case ggml_type::q5_1:
    case ggml_type::q8_0:
    case ggml_type::q2_k:
    case ggml_type::q3_k:
    case ggml_type::q4_k:
    case ggml_type::q5_k:
    case ggml_type::q6_k:
        return f(quant_rows(w));
    default:
        return PIB_ERR_UNSUPPORTED;
    }
}

} // namespace pi::cpu
