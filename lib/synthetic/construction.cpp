#include "synthetic/construction.hpp"

#include <algorithm>
#include <cmath>

#include "quant/types.hpp"
#include "synthetic/firing.hpp"

namespace pi::synth {
namespace {

double pow2_near(double x) {
    return std::exp2(std::round(std::log2(x)));
}

constexpr double qk_variance = 2.0;     // variance of q and k entries: scores spread ~2
constexpr double norm_weight_std = 0.1; // RMSNorm weights are 1 + N(0, 0.1^2)

// fc1 = [A'; -A'] with A' = [s_a·A·diag(w); w0·e0], fc2 = [B', -B'] with B' = [s_b·B, b]:
// fc2·relu(fc1·h) = B'·A'·h = gate·diag(w)·h = rms(h)·(gate·xn), whose sign is the gate's.
void build_predictor(layer_weights& lw, const std::vector<float>& bias, const synth_options& o,
                     const geometry& g, int64_t layer) {
    const low_rank& f = lw.gate_factors;
    const int64_t r0 = g.rank0;
    const int64_t half = r0 + 1;
    lw.fc1 = matrix(2 * half, g.n_embd);
    for (int64_t k = 0; k < r0; ++k)
        for (int64_t j = 1; j < g.n_embd; ++j) {
            const float v = f.scale_a * f.a.at(k, j) * lw.ffn_norm[static_cast<size_t>(j)];
            lw.fc1.at(k, j) = v;
            lw.fc1.at(half + k, j) = -v;
        }
    lw.fc1.at(r0, 0) = lw.ffn_norm[0];
    lw.fc1.at(half + r0, 0) = -lw.ffn_norm[0];
    lw.fc2 = matrix(g.n_ff, 2 * half);
    for (int64_t i = 0; i < g.n_ff; ++i) {
        for (int64_t k = 0; k < r0; ++k) {
            lw.fc2.at(i, k) = f.scale_b * f.b.at(i, k);
            lw.fc2.at(i, half + k) = -f.scale_b * f.b.at(i, k);
        }
        lw.fc2.at(i, r0) = bias[static_cast<size_t>(i)];
        lw.fc2.at(i, half + r0) = -bias[static_cast<size_t>(i)];
    }
    if (o.predictor_noise > 0.0f) {
        // Independent relative noise on every entry: the two halves no longer cancel, so
        // scores near the threshold change side.
        rng noise = stream_rng(o.seed, layer, stream::predictor_noise);
        for (float& v : lw.fc2.data)
            v = static_cast<float>(v * (1.0 + o.predictor_noise * noise.normal()));
    }
}

} // namespace

std::vector<float> norm_weights(int64_t n, rng r) {
    std::vector<float> w(static_cast<size_t>(n));
    for (float& v : w)
        v = round_f16(1.0 + norm_weight_std * r.normal());
    return w;
}

low_rank low_rank_factors(const synth_options& o, const geometry& g, int64_t layer) {
    low_rank f;
    f.a = rademacher(g.rank0, g.n_embd, stream_rng(o.seed, layer, stream::predictor_a));
    f.a.zero_column(0);
    f.b = rademacher(g.n_ff, g.rank0, stream_rng(o.seed, layer, stream::predictor_b));
    f.scale_a = static_cast<float>(pow2_near(1.0 / std::sqrt(static_cast<double>(g.n_embd))));
    f.scale_b = static_cast<float>(pow2_near(1.0 / std::sqrt(static_cast<double>(g.rank0))));
    return f;
}

float residual_constant(const geometry& g) {
    return round_f16(0.5 * std::sqrt(static_cast<double>(g.n_embd - 1)));
}

matrix token_embedding(const synth_options& o, const geometry& g) {
    matrix embd = gaussian(g.n_vocab, g.n_embd, 1.0, stream_rng(o.seed, -1, stream::token_embd));
    const float c = residual_constant(g);
    for (int64_t v = 0; v < g.n_vocab; ++v)
        embd.at(v, 0) = c;
    return embd;
}

std::vector<int64_t> calibration_token_ids(const synth_options& o, const geometry& g) {
    rng pick = stream_rng(o.seed, -1, stream::calibration_tokens);
    std::vector<int64_t> ids(static_cast<size_t>(calibration_tokens));
    for (int64_t& id : ids)
        id = static_cast<int64_t>(pick.below(static_cast<uint64_t>(g.n_vocab)));
    return ids;
}

layer_weights draw_layer(const synth_options& o, const geometry& g, int64_t layer) {
    layer_weights lw;
    const uint64_t seed = o.seed;
    // Attention: channel 0 is neither read nor written.
    lw.attn_norm = norm_weights(g.n_embd, stream_rng(seed, layer, stream::attn_norm));
    const double qk_std = std::sqrt(qk_variance / static_cast<double>(g.n_embd));
    const double v_std = 1.0 / std::sqrt(static_cast<double>(g.n_embd));
    lw.attn_q = gaussian(g.n_embd, g.n_embd, qk_std, stream_rng(seed, layer, stream::attn_q));
    lw.attn_k = gaussian(g.n_embd_kv, g.n_embd, qk_std, stream_rng(seed, layer, stream::attn_k));
    lw.attn_v = gaussian(g.n_embd_kv, g.n_embd, v_std, stream_rng(seed, layer, stream::attn_v));
    lw.attn_output =
        gaussian(g.n_embd, g.n_embd, v_std, stream_rng(seed, layer, stream::attn_output));
    for (matrix* m : {&lw.attn_q, &lw.attn_k, &lw.attn_v})
        m->zero_column(0);
    std::fill_n(lw.attn_output.row(0), g.n_embd, 0.0f);

    // FFN: the gate is B·A scaled (B·A holds small integers, so the gate is exactly
    // representable in F16 and equals the predictor's product of F16 factors); column 0 will
    // hold the biases.
    lw.ffn_norm = norm_weights(g.n_embd, stream_rng(seed, layer, stream::ffn_norm));
    lw.ffn_norm[0] = 1.0f;
    lw.gate_factors = low_rank_factors(o, g, layer);
    lw.ffn_gate = project(lw.gate_factors.b, transpose(lw.gate_factors.a));
    lw.ffn_gate.scale(lw.gate_factors.scale());
    const double up_std = 1.0 / std::sqrt(static_cast<double>(g.n_embd));
    lw.ffn_up = gaussian(g.n_ff, g.n_embd, up_std, stream_rng(seed, layer, stream::ffn_up));
    lw.ffn_up.zero_column(0);
    lw.ffn_down_t = gaussian(g.n_ff, g.n_embd, 1.0, stream_rng(seed, layer, stream::ffn_down));
    lw.ffn_down_t.zero_column(0);
    return lw;
}

void fit_gate(layer_weights& lw, const matrix& h, const synth_options& o, const geometry& g,
              int64_t layer) {
    const low_rank& f = lw.gate_factors;
    // s[t][i] = gate_i·diag(w)·h_t without the bias term, through the low-rank factors.
    matrix scaled_h = h;
    for (int64_t t = 0; t < h.rows; ++t)
        for (int64_t j = 0; j < g.n_embd; ++j)
            scaled_h.at(t, j) *= lw.ffn_norm[static_cast<size_t>(j)];
    matrix s = project(project(scaled_h, f.a), f.b);
    s.scale(f.scale());

    const std::vector<double> rates =
        firing_rates(g.n_ff, 1.0 - static_cast<double>(o.sparsity), o.power_law,
                     stream_rng(o.seed, layer, stream::firing_rates));
    const double w0c = static_cast<double>(lw.ffn_norm[0]) * residual_constant(g);
    const std::vector<float> bias = gate_biases(s, rates, w0c);
    for (int64_t i = 0; i < g.n_ff; ++i)
        lw.ffn_gate.at(i, 0) = bias[static_cast<size_t>(i)];
    build_predictor(lw, bias, o, g, layer);
}

std::vector<float> output_norm_weights(const synth_options& o, const geometry& g) {
    return norm_weights(g.n_embd, stream_rng(o.seed, -1, stream::output_norm));
}

matrix unscaled_output(const synth_options& o, const geometry& g) {
    matrix output = gaussian(g.n_vocab, g.n_embd, 1.0, stream_rng(o.seed, -1, stream::output));
    output.zero_column(0);
    return output;
}

} // namespace pi::synth
