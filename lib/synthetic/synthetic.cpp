// Synthetic PowerInfer models: random weights built so that the FFN reaches a chosen activation
// sparsity with power-law skewed neurons and an exact (llama-style families) or calibrated
// (LayerNorm families) predictor (docs/synthetic-models.md). The model is built layer by layer;
// each layer runs over calibration tokens (through the engine for the llama-style families,
// through the writer's own forward pass for falcon and opt), and what it computes sets the
// layer's biases and output scales, so the statistics hold at every depth.
#include "synthetic/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "gguf/gguf.hpp"
#include "synthetic/calibration.hpp"
#include "synthetic/construction.hpp"
#include "synthetic/gguf_output.hpp"
#include "synthetic/ln_output.hpp"
#include "synthetic/ln_synthetic.hpp"
#include "synthetic/options.hpp"

namespace pi {
namespace {

using namespace synth;

// h + factor·delta, row by row.
matrix add_scaled(const matrix& h, const matrix& delta, float factor) {
    matrix sum = h;
    for (size_t i = 0; i < sum.data.size(); ++i)
        sum.data[i] += factor * delta.data[i];
    return sum;
}

matrix rows_of(const matrix& m, const std::vector<int64_t>& ids) {
    matrix picked(static_cast<int64_t>(ids.size()), m.cols);
    for (size_t t = 0; t < ids.size(); ++t)
        std::copy_n(m.row(ids[t]), m.cols, picked.row(static_cast<int64_t>(t)));
    return picked;
}

// Calibrates one layer against `h`, the residual entering it, and returns the residual leaving
// it. Two engine runs: the first, of the attention block with its output unscaled, measures
// what the attention block adds; the second, with that scale and the fitted gate, gives the
// activations that set the scale of the FFN output.
matrix calibrate_layer(layer_weights& lw, const matrix& h, const layer_probe& probe,
                       const synth_options& o, const geometry& g, int64_t layer) {
    const matrix attention = add_scaled(probe.attention_residual(h, lw), h, -1.0f);
    const float attn_factor = scale_to_rms(attention, attn_output_rms);
    lw.attn_output.scale(attn_factor);
    fit_gate(lw, add_scaled(h, attention, attn_factor), o, g, layer);

    const layer_observation second = probe.layer(h, lw);
    const matrix ffn = ffn_output(second.activation, lw.ffn_down_t);
    const float ffn_factor = scale_to_rms(ffn, ffn_output_rms);
    lw.ffn_down_t.scale(ffn_factor);
    return add_scaled(second.input, ffn, ffn_factor);
}

// The llama-style families: every tensor, calibrated through the engine's forward pass.
void add_llama_tensors(gguf::writer& w, const synth_options& options, const geometry& g,
                       const std::string& out_path) {
    const std::vector<int64_t> calibration_ids = calibration_token_ids(options, g);
    matrix h;
    {
        const matrix embd = token_embedding(options, g);
        h = rows_of(embd, calibration_ids);
        add_matrix(w, "token_embd.weight", embd, options.weight_type);
    }

    const layer_probe probe(options, g, out_path);
    layer_weights last;
    matrix entering_last;
    for (int64_t layer = 0; layer < g.n_layer; ++layer) {
        layer_weights lw = draw_layer(options, g, layer);
        matrix leaving = calibrate_layer(lw, h, probe, options, g, layer);
        add_layer(w, lw, layer, options.weight_type, options.sparse);
        if (layer + 1 == g.n_layer) {
            last = std::move(lw);
            entering_last = std::move(h);
        }
        h = std::move(leaving);
    }

    // The output scale from the engine's logits: the last layer again, now complete, followed
    // by the head restricted to the rows of the calibration tokens.
    const std::vector<float> out_norm = output_norm_weights(options, g);
    matrix output = unscaled_output(options, g);
    const matrix head_rows = rows_of(output, calibration_ids);
    const probe_head head{out_norm, head_rows};
    const double logits = rms(probe.logits(entering_last, last, head));
    output.scale(static_cast<float>(logit_rms / std::max(1e-6, logits)));
    add_vector(w, "output_norm.weight", out_norm);
    add_matrix(w, "output.weight", output, options.weight_type);
}

} // namespace

void write_synthetic_model(const synth_options& options, const std::string& out_path) {
    validate(options);
    if (out_path.empty()) bad_option("output path is empty");
    const family_traits& f = family_named(options.arch);
    const std::unique_ptr<gguf::file> vocab = gguf::file::open(options.vocab_path);
    const auto n_vocab =
        static_cast<int64_t>(vocab->get_string_array("tokenizer.ggml.tokens").size());
    if (n_vocab == 0) fail(status::format, options.vocab_path, ": tokenizer.ggml.tokens is empty");
    const geometry g = make_geometry(options, n_vocab);
    check_size(g, options);

    gguf::writer w(options.sparse);
    if (f.layer_norm)
        add_ln_metadata(w, f, options, g);
    else
        add_metadata(w, options, g);
    for (const auto& [key, v] : vocab->metadata())
        if (std::string_view(key).starts_with("tokenizer.")) w.set(key, v);
    if (f.layer_norm)
        add_ln_tensors(w, f, options, g);
    else
        add_llama_tensors(w, options, g, out_path);
    w.write(out_path);
}

} // namespace pi
