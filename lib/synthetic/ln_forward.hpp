#pragma once
// The pieces of the LayerNorm families' forward pass (falcon, opt) the writer computes itself
// to calibrate them (docs/synthetic-models.md, "The LayerNorm families"), in the terms of
// docs/forward-pass.md, "Falcon and OPT". Inputs are the calibration rows: sequence s holds
// rows s·calibration_length .. at positions 0 .. calibration_length - 1.
#include <span>
#include <vector>

#include "synthetic/matrix.hpp"
#include "synthetic/options.hpp"

namespace pi::synth {

struct norm_params {
    std::vector<float> weight, bias;
};

// y = (x − mean(x)) / sqrt(var(x) + eps) · w + b per row (biased variance).
matrix layer_norm(const matrix& x, const norm_params& n, double eps);

// sqrt(var(x) + eps) of each row: what LayerNorm divides by.
std::vector<double> row_deviation(const matrix& x, double eps);

// x·Wᵀ (+ b on every row when b is not empty).
matrix linear(const matrix& x, const matrix& w, std::span<const float> b = {});

// Causal grouped-query attention within each calibration sequence: q [T, n_embd],
// k and v [T, n_embd_kv]; with `neox_rope` q and k are rotated first (NeoX pairs
// (x[j], x[j + head_dim/2]), base `rope_base`). Returns the heads side by side, [T, n_embd].
matrix causal_attention(const matrix& q, const matrix& k, const matrix& v, const geometry& g,
                        bool neox_rope, double rope_base);

} // namespace pi::synth
