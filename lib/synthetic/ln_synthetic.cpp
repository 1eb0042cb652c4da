#include "synthetic/ln_synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "synthetic/gguf_output.hpp"
#include "synthetic/ln_construction.hpp"
#include "synthetic/ln_output.hpp"

namespace pi::synth {
namespace {

constexpr double position_std = 0.5; // opt's learned positions, next to unit-RMS embeddings
constexpr int64_t opt_position_offset = 2;

matrix rows_of(const matrix& m, const std::vector<int64_t>& ids) {
    matrix picked(static_cast<int64_t>(ids.size()), m.cols);
    for (size_t t = 0; t < ids.size(); ++t)
        std::copy_n(m.row(ids[t]), m.cols, picked.row(static_cast<int64_t>(t)));
    return picked;
}

void add_in_place(matrix& x, const matrix& y) {
    for (size_t i = 0; i < x.data.size(); ++i)
        x.data[i] += y.data[i];
}

void add_row_in_place(matrix& x, std::span<const float> b) {
    for (int64_t t = 0; t < x.rows; ++t)
        for (int64_t j = 0; j < x.cols; ++j)
            x.at(t, j) += b[static_cast<size_t>(j)];
}

// relu(s + β) per neuron.
matrix activation(const matrix& s, const std::vector<float>& beta) {
    matrix a(s.rows, s.cols);
    for (int64_t t = 0; t < s.rows; ++t)
        for (int64_t i = 0; i < s.cols; ++i)
            a.at(t, i) = std::max(0.0f, s.at(t, i) + beta[static_cast<size_t>(i)]);
    return a;
}

// Wo·Attention(an) (without opt's output bias), with attn_output as it stands.
matrix attention_block(const family_traits& f, const ln_layer_weights& lw, const matrix& an,
                       const synth_options& o, const geometry& g) {
    const bool opt = f.id == family::opt;
    const matrix q = linear(an, lw.attn_q, lw.q_bias);
    const matrix k = linear(an, lw.attn_k, lw.k_bias);
    const matrix v = linear(an, lw.attn_v, lw.v_bias);
    return linear(causal_attention(q, k, v, g, !opt, o.rope_freq_base), lw.attn_output);
}

// The FFN block with the offsets fitted and ffn_down_t scaled: its addition to the residual.
matrix fitted_ffn(ln_layer_weights& lw, const family_traits& f, const matrix& xn,
                  const matrix& predictor_input, const synth_options& o, const geometry& g,
                  int64_t layer) {
    const matrix s = up_without_offset(lw, xn);
    const std::vector<float> beta = fit_up(lw, f, s, predictor_input, o, g, layer);
    matrix ffn = ffn_output(activation(s, beta), lw.ffn_down_t);
    const float factor = scale_to_rms(ffn, ffn_output_rms);
    lw.ffn_down_t.scale(factor);
    ffn.scale(factor);
    if (!lw.down_bias.empty()) add_row_in_place(ffn, lw.down_bias);
    return ffn;
}

// Calibrates one layer on `h`, the residual entering it at the calibration tokens, and
// returns the residual leaving it.
matrix calibrate_layer(ln_layer_weights& lw, const family_traits& f, const matrix& h,
                       const synth_options& o, const geometry& g, int64_t layer) {
    const double eps = o.rms_eps;
    const matrix an = layer_norm(h, lw.attn_norm, eps);
    if (f.id == family::opt) {
        matrix attention = attention_block(f, lw, an, o, g);
        const float factor = scale_to_rms(attention, attn_output_rms);
        lw.attn_output.scale(factor);
        attention.scale(factor);
        add_row_in_place(attention, lw.output_bias);
        matrix x = h;
        add_in_place(x, attention);
        const matrix ffn = fitted_ffn(lw, f, layer_norm(x, lw.ffn_norm, eps), x, o, g, layer);
        add_in_place(x, ffn);
        return x;
    }
    // Falcon's parallel block: attention and FFN both read the layer input h.
    matrix attention = f.id == family::falcon_40b
                           ? attention_block(f, lw, layer_norm(h, lw.attn_norm_2, eps), o, g)
                           : attention_block(f, lw, an, o, g);
    const float factor = scale_to_rms(attention, attn_output_rms);
    lw.attn_output.scale(factor);
    attention.scale(factor);
    const matrix ffn = fitted_ffn(lw, f, an, h, o, g, layer);
    matrix out = h;
    add_in_place(out, attention);
    add_in_place(out, ffn);
    return out;
}

// The factor that gives the logits of the calibration tokens (token t against head row r, the
// row of token ids[r]) the RMS logit_rms. With a tied output the row of a token's own id holds
// the embedding the residual started from, and its logit stands far above the rest: those
// pairs are left out so that the scale is that of the vocabulary at large.
float logit_scale(const matrix& h, const norm_params& n, const matrix& head_rows, double eps,
                  const std::vector<int64_t>* ids) {
    const matrix logits = linear(layer_norm(h, n, eps), head_rows);
    double sum = 0.0;
    double count = 0.0;
    for (int64_t t = 0; t < logits.rows; ++t)
        for (int64_t r = 0; r < logits.cols; ++r) {
            if (ids && (*ids)[static_cast<size_t>(t)] == (*ids)[static_cast<size_t>(r)]) continue;
            sum += static_cast<double>(logits.at(t, r)) * logits.at(t, r);
            count += 1.0;
        }
    const double r = count > 0.0 ? std::sqrt(sum / count) : 0.0;
    return static_cast<float>(logit_rms / std::max(1e-6, r));
}

} // namespace

void add_ln_tensors(gguf::writer& w, const family_traits& f, const synth_options& o,
                    const geometry& g) {
    const bool opt = f.id == family::opt;
    const std::vector<int64_t> ids = calibration_token_ids(o, g);
    const matrix embd = token_embedding(o, g);
    add_matrix(w, "token_embd.weight", embd, o.weight_type);
    matrix h = rows_of(embd, ids);
    if (opt) {
        // Hugging Face's table: n_ctx_train positions after two offset rows.
        matrix positions = gaussian(o.n_ctx_train + opt_position_offset, g.n_embd, position_std,
                                    stream_rng(o.seed, -1, stream::position_embd));
        positions.zero_column(0);
        for (int64_t t = 0; t < h.rows; ++t)
            for (int64_t j = 0; j < g.n_embd; ++j)
                h.at(t, j) += positions.at(t % calibration_length + opt_position_offset, j);
        add_matrix(w, "position_embd.weight", positions, o.weight_type);
    }

    for (int64_t layer = 0; layer < g.n_layer; ++layer) {
        ln_layer_weights lw = draw_ln_layer(f, o, g, layer);
        h = calibrate_layer(lw, f, h, o, g, layer);
        add_ln_layer(w, f, lw, layer, o.weight_type, o.sparse);
    }

    norm_params out_norm = random_norm(g.n_embd, stream_rng(o.seed, -1, stream::output_norm),
                                       stream_rng(o.seed, -1, stream::output_norm_bias));
    if (opt) {
        // Tied output: the logits are token_embd·(the normed h), so the output norm carries the
        // scale, and it leaves out the constant channel, which would shift every logit alike.
        // The residual is mostly the token's own embedding; with positive weights its own row
        // would win every argmax and greedy decoding would repeat the last token. Weights of
        // random sign make that row's logit a sum of terms of either sign, like any other's.
        rng sign = stream_rng(o.seed, -1, stream::output_norm_sign);
        for (float& w_j : out_norm.weight)
            w_j *= sign.sign();
        out_norm.weight[0] = 0.0f;
        out_norm.bias[0] = 0.0f;
        const float factor = logit_scale(h, out_norm, rows_of(embd, ids), o.rms_eps, &ids);
        for (std::vector<float>* v : {&out_norm.weight, &out_norm.bias})
            for (float& x : *v)
                x = round_f16(static_cast<double>(x) * factor);
        add_norm(w, "output_norm", out_norm);
        return;
    }
    matrix output = unscaled_output(o, g);
    output.scale(logit_scale(h, out_norm, rows_of(output, ids), o.rms_eps, nullptr));
    add_norm(w, "output_norm", out_norm);
    add_matrix(w, "output.weight", output, o.weight_type);
}

} // namespace pi::synth
