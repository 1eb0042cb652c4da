#pragma once
// The weights of the LayerNorm families (falcon, falcon-40b, opt): what is drawn at random, the
// constant channel, the low-rank up projection with its fitted offsets and the calibrated
// predictor (docs/synthetic-models.md, "The LayerNorm families").
#include <cstdint>
#include <vector>

#include "synthetic/construction.hpp"
#include "synthetic/family.hpp"
#include "synthetic/ln_forward.hpp"

namespace pi::synth {

struct ln_layer_weights {
    norm_params attn_norm;   // falcon: the FFN's input norm (Falcon-40B's ln_mlp) and, without
                             // attn_norm_2, the attention's too; opt: the attention's
    norm_params attn_norm_2; // falcon-40b only: the attention's input norm (ln_attn)
    norm_params ffn_norm;    // opt only
    matrix attn_q, attn_k, attn_v, attn_output;             // falcon writes q, k, v as one attn_qkv
    std::vector<float> q_bias, k_bias, v_bias, output_bias; // opt only
    matrix ffn_up, ffn_down_t;
    std::vector<float> up_bias, down_bias; // opt only
    matrix fc1, fc2;
    low_rank up_factors;
};

// Norm weights 1 + N(0, 0.1²) and biases N(0, 0.1²), in F16 values.
norm_params random_norm(int64_t n, rng weight, rng bias);

// Every random tensor of a layer; attn_output, ffn_down_t and the biases that follow them are
// unscaled, the up offsets zero and there is no predictor yet.
ln_layer_weights draw_ln_layer(const family_traits& f, const synth_options& o, const geometry& g,
                               int64_t layer);

// The FFN input norm: attn_norm (falcon, parallel block) or ffn_norm (opt).
const norm_params& ffn_input_norm(const family_traits& f, const ln_layer_weights& lw);

// s [tokens, n_ff]: the up pre-activations without the per-neuron offset, for the FFN input
// `xn` (through the low-rank factors).
matrix up_without_offset(const ln_layer_weights& lw, const matrix& xn);

// Sets the per-neuron offsets (falcon: column 0 of ffn_up, read against the constant 1 of the
// FFN input's channel 0; opt: ffn_up.bias) from `s` and the layer's firing rates, returns
// them, and builds the predictor for the predictor input `x` (one row per calibration token).
std::vector<float> fit_up(ln_layer_weights& lw, const family_traits& f, const matrix& s,
                          const matrix& x, const synth_options& o, const geometry& g,
                          int64_t layer);

} // namespace pi::synth
