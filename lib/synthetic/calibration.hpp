#pragma once
// The engine's view of one layer under construction: the layer runs as the only block of a small
// probe model, through the library's own forward pass on the CPU backend, over the calibration
// sequences (docs/synthetic-models.md, "Calibration through the engine").
#include <cstdint>
#include <span>
#include <string>

#include "synthetic/construction.hpp"

namespace pi::synth {

// What the engine computed, one row per calibration token.
struct layer_observation {
    matrix input;      // [tokens, n_embd]: the residual before ffn_norm
    matrix activation; // [tokens, n_ff]: the FFN activation after the GLU
    matrix logits;     // [tokens, head rows]: only when the probe has an output head
};

// The output head a probe may end with: its norm weights and some rows of `output`.
struct probe_head {
    std::span<const float> norm;
    const matrix& rows;
};

class layer_probe {
  public:
    // Probe files are written next to `out_path` under unique names and removed after each run.
    layer_probe(const synth_options& o, const geometry& g, std::string out_path);

    // Each run feeds `lw` with `h`: a model whose token t embeds as row t of `h` (the residual
    // entering the layer at calibration token t) runs calibration sequence s as the tokens
    // s·length .. s·length + length - 1 at positions 0 .. length - 1. The probe is a dense F32
    // file with ReLU activations whatever the options, so that the calibration, and with it
    // every weight, is the same for the sparse and dense, F32 and F16, exact and noisy files of
    // a seed.

    // The residual before ffn_norm: `h` plus what the attention block adds. The probe's FFN is
    // a single idle neuron, since the attention's scale is all this run is for.
    matrix attention_residual(const matrix& h, const layer_weights& lw) const;
    // The whole layer.
    layer_observation layer(const matrix& h, const layer_weights& lw) const;
    // The whole layer followed by the output head: the logits of every calibration token.
    matrix logits(const matrix& h, const layer_weights& lw, const probe_head& head) const;

  private:
    layer_observation run(const matrix& h, const layer_weights& lw, bool whole_ffn,
                          const probe_head* head) const;
    void write(const std::string& path, const matrix& h, const layer_weights& lw, bool whole_ffn,
               const probe_head* head) const;

    const synth_options& options_;
    const geometry& geometry_;
    std::string out_path_;
};

} // namespace pi::synth
