#pragma once
// The weights of a synthetic model: what is drawn at random, the constant channel, the low-rank
// gate with its exact predictor and the biases fitted to calibration statistics
// (docs/synthetic-models.md, "The construction").
#include <cstdint>
#include <vector>

#include "synthetic/matrix.hpp"
#include "synthetic/options.hpp"

namespace pi::synth {

// Calibration runs several independent sequences: tokens of one sequence share their context,
// so statistics from a single sequence underestimate the spread between sequences.
constexpr int64_t calibration_sequences = 4;
constexpr int64_t calibration_length = 32;
constexpr int64_t calibration_tokens = calibration_sequences * calibration_length;
constexpr double attn_output_rms = 0.6; // per-channel RMS each attention block adds to h
constexpr double ffn_output_rms = 0.6;  // the same for each FFN block
constexpr double logit_rms = 3.0;       // target spread of the logits over the vocabulary

// Gate factors: A [r0, n_embd] and B [n_ff, r0] of random signs, column 0 of A zero (the
// constant channel enters the gate only through the bias). scale = s_a·s_b with powers of
// two near 1/sqrt(n_embd) and 1/sqrt(r0), so products stay exact in F16.
struct low_rank {
    matrix a, b;
    float scale_a = 0, scale_b = 0;
    float scale() const noexcept { return scale_a * scale_b; }
};

struct layer_weights {
    std::vector<float> attn_norm, ffn_norm;
    matrix attn_q, attn_k, attn_v, attn_output;
    matrix ffn_gate, ffn_up, ffn_down_t;
    matrix fc1, fc2;
    low_rank gate_factors;
};

// Norm weights 1 + N(0, 0.1²), rounded to F16.
std::vector<float> norm_weights(int64_t n, rng r);

// The gate factors of `layer` (the FFN up factors of the gate-less families).
low_rank low_rank_factors(const synth_options& o, const geometry& g, int64_t layer);

// The value C of residual channel 0, the gate's bias input: 0.5·sqrt(n_embd - 1), in F16.
float residual_constant(const geometry& g);

// token_embd [n_vocab, n_embd]: unit Gaussians with channel 0 set to the constant.
matrix token_embedding(const synth_options& o, const geometry& g);

// The token ids of the calibration sequences, one after the other.
std::vector<int64_t> calibration_token_ids(const synth_options& o, const geometry& g);

// Every random tensor of a layer. The channel-0 rules hold already; what calibration sets is
// left open: attn_output and ffn_down_t are unscaled, the gate's bias column is zero and there
// is no predictor yet.
layer_weights draw_layer(const synth_options& o, const geometry& g, int64_t layer);

// Sets the gate biases from `h` (the residual before ffn_norm, one row per calibration token)
// and the firing rates of the layer, then builds the predictor fc1/fc2 for that gate.
void fit_gate(layer_weights& lw, const matrix& h, const synth_options& o, const geometry& g,
              int64_t layer);

std::vector<float> output_norm_weights(const synth_options& o, const geometry& g);

// output [n_vocab, n_embd]: unit Gaussians with column 0 zero; calibration scales it.
matrix unscaled_output(const synth_options& o, const geometry& g);

} // namespace pi::synth
