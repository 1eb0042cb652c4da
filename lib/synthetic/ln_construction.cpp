#include "synthetic/ln_construction.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "synthetic/firing.hpp"

namespace pi::synth {
namespace {

constexpr double norm_bias_std = 0.1;       // LayerNorm biases are N(0, 0.1²)
constexpr double projection_bias_std = 0.2; // opt's q, k, v biases
constexpr double output_bias_share = 0.1;   // opt's attn_output and ffn_down biases: N(0, σ²)
                                            // with σ a tenth of the block's output RMS
constexpr double qk_variance = 2.0;         // as in the llama families: scores spread ~2

std::vector<float> random_vector(int64_t n, double stddev, rng r) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v)
        x = round_f16(stddev * r.normal());
    return v;
}

// fc1 = [A'; −A'], fc2 = [B', −B'] with A' = [s_a·A·diag(w)·P ; (σ̄/C)·e0ᵀ] and
// B' = [s_b·B, c], P the centring I − 11ᵀ/d and c_i = s_b·B_i·(s_a·A·b) + β_i the neuron's
// offset once the norm's bias is folded in. Then fc2·relu(fc1·x) = B'·A'·x =
// σ(x)·(up_i·xn + β_i) + c_i·(σ̄ − σ(x)): the pre-activation times LayerNorm's divisor σ(x),
// except that σ(x), which no bias-free ReLU network of this rank computes, is replaced by its
// calibration mean σ̄ in the offset term, read from the constant residual channel x_0 = C.
void build_ln_predictor(ln_layer_weights& lw, const family_traits& f,
                        const std::vector<float>& beta, const matrix& x, const synth_options& o,
                        const geometry& g, int64_t layer) {
    const norm_params& n = ffn_input_norm(f, lw);
    const low_rank& u = lw.up_factors;
    const int64_t r0 = g.rank0;
    const int64_t half = r0 + 1;
    const std::vector<double> dev = row_deviation(x, o.rms_eps);
    const double sigma_bar =
        std::accumulate(dev.begin(), dev.end(), 0.0) / static_cast<double>(dev.size());

    lw.fc1 = matrix(2 * half, g.n_embd);
    std::vector<double> a_bias(static_cast<size_t>(r0)); // s_a·A·b
    for (int64_t k = 0; k < r0; ++k) {
        double mean = 0.0;
        for (int64_t j = 0; j < g.n_embd; ++j) {
            const auto jj = static_cast<size_t>(j);
            mean += static_cast<double>(u.scale_a) * u.a.at(k, j) * n.weight[jj];
            a_bias[static_cast<size_t>(k)] +=
                static_cast<double>(u.scale_a) * u.a.at(k, j) * n.bias[jj];
        }
        mean /= static_cast<double>(g.n_embd);
        for (int64_t j = 0; j < g.n_embd; ++j) {
            const double v =
                static_cast<double>(u.scale_a) * u.a.at(k, j) * n.weight[static_cast<size_t>(j)] -
                mean;
            lw.fc1.at(k, j) = round_f16(v);
            lw.fc1.at(half + k, j) = -lw.fc1.at(k, j);
        }
    }
    lw.fc1.at(r0, 0) = round_f16(sigma_bar / residual_constant(g));
    lw.fc1.at(half + r0, 0) = -lw.fc1.at(r0, 0);

    lw.fc2 = matrix(g.n_ff, 2 * half);
    for (int64_t i = 0; i < g.n_ff; ++i) {
        double c = beta[static_cast<size_t>(i)];
        for (int64_t k = 0; k < r0; ++k) {
            const float b = round_f16(static_cast<double>(u.scale_b) * u.b.at(i, k));
            lw.fc2.at(i, k) = b;
            lw.fc2.at(i, half + k) = -b;
            c += static_cast<double>(u.scale_b) * u.b.at(i, k) * a_bias[static_cast<size_t>(k)];
        }
        lw.fc2.at(i, r0) = round_f16(c);
        lw.fc2.at(i, half + r0) = -lw.fc2.at(i, r0);
    }
    if (o.predictor_noise > 0.0f) {
        rng noise = stream_rng(o.seed, layer, stream::predictor_noise);
        for (float& v : lw.fc2.data)
            v = static_cast<float>(v * (1.0 + o.predictor_noise * noise.normal()));
    }
}

} // namespace

norm_params random_norm(int64_t n, rng weight, rng bias) {
    return {norm_weights(n, weight), random_vector(n, norm_bias_std, bias)};
}

const norm_params& ffn_input_norm(const family_traits& f, const ln_layer_weights& lw) {
    return f.id == family::opt ? lw.ffn_norm : lw.attn_norm;
}

ln_layer_weights draw_ln_layer(const family_traits& f, const synth_options& o, const geometry& g,
                               int64_t layer) {
    ln_layer_weights lw;
    const uint64_t seed = o.seed;
    auto stream_of = [&](stream s) { return stream_rng(seed, layer, s); };
    lw.attn_norm =
        random_norm(g.n_embd, stream_of(stream::attn_norm), stream_of(stream::attn_norm_bias));
    if (f.id != family::opt) {
        // Channel 0 of the FFN input is the constant 1, the input of the up offsets.
        lw.attn_norm.weight[0] = 0.0f;
        lw.attn_norm.bias[0] = 1.0f;
    }
    if (f.id == family::falcon_40b)
        lw.attn_norm_2 = random_norm(g.n_embd, stream_of(stream::attn_norm_2),
                                     stream_of(stream::attn_norm_2_bias));
    if (f.id == family::opt)
        lw.ffn_norm =
            random_norm(g.n_embd, stream_of(stream::ffn_norm), stream_of(stream::ffn_norm_bias));

    // Attention: reads no constant, never writes the residual's channel 0.
    const double qk_std = std::sqrt(qk_variance / static_cast<double>(g.n_embd));
    const double v_std = 1.0 / std::sqrt(static_cast<double>(g.n_embd));
    lw.attn_q = gaussian(g.n_embd, g.n_embd, qk_std, stream_of(stream::attn_q));
    lw.attn_k = gaussian(g.n_embd_kv, g.n_embd, qk_std, stream_of(stream::attn_k));
    lw.attn_v = gaussian(g.n_embd_kv, g.n_embd, v_std, stream_of(stream::attn_v));
    lw.attn_output = gaussian(g.n_embd, g.n_embd, v_std, stream_of(stream::attn_output));
    for (matrix* m : {&lw.attn_q, &lw.attn_k, &lw.attn_v})
        m->zero_column(0);
    std::fill_n(lw.attn_output.row(0), g.n_embd, 0.0f);
    if (f.id == family::opt) {
        lw.q_bias = random_vector(g.n_embd, projection_bias_std, stream_of(stream::attn_q_bias));
        lw.k_bias = random_vector(g.n_embd_kv, projection_bias_std, stream_of(stream::attn_k_bias));
        lw.v_bias = random_vector(g.n_embd_kv, projection_bias_std, stream_of(stream::attn_v_bias));
        lw.output_bias = random_vector(g.n_embd, output_bias_share * attn_output_rms,
                                       stream_of(stream::attn_output_bias));
        lw.output_bias[0] = 0.0f;
        lw.down_bias = random_vector(g.n_embd, output_bias_share * ffn_output_rms,
                                     stream_of(stream::ffn_down_bias));
        lw.down_bias[0] = 0.0f;
    }

    // FFN: up = s_a·s_b·B·A (exact in F16, column 0 zero until the offsets are fitted).
    lw.up_factors = low_rank_factors(o, g, layer);
    lw.ffn_up = project(lw.up_factors.b, transpose(lw.up_factors.a));
    lw.ffn_up.scale(lw.up_factors.scale());
    lw.ffn_down_t = gaussian(g.n_ff, g.n_embd, 1.0, stream_of(stream::ffn_down));
    lw.ffn_down_t.zero_column(0);
    return lw;
}

matrix up_without_offset(const ln_layer_weights& lw, const matrix& xn) {
    matrix s = project(project(xn, lw.up_factors.a), lw.up_factors.b);
    s.scale(lw.up_factors.scale());
    return s;
}

std::vector<float> fit_up(ln_layer_weights& lw, const family_traits& f, const matrix& s,
                          const matrix& x, const synth_options& o, const geometry& g,
                          int64_t layer) {
    const std::vector<double> rates =
        firing_rates(g.n_ff, 1.0 - static_cast<double>(o.sparsity), o.power_law,
                     stream_rng(o.seed, layer, stream::firing_rates));
    const std::vector<float> beta = gate_biases(s, rates, 1.0);
    if (f.id == family::opt) {
        lw.up_bias = beta;
    } else {
        for (int64_t i = 0; i < g.n_ff; ++i)
            lw.ffn_up.at(i, 0) = beta[static_cast<size_t>(i)];
    }
    build_ln_predictor(lw, f, beta, x, o, g, layer);
    return beta;
}

} // namespace pi::synth
