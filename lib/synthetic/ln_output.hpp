#pragma once
// The LayerNorm families' keys and tensors in a GGUF writer (docs/synthetic-models.md, "What the
// file contains"; tensor names of docs/forward-pass.md, "Falcon and OPT").
#include <cstdint>
#include <string>

#include "gguf/gguf.hpp"
#include "synthetic/ln_construction.hpp"

namespace pi::synth {

// general.*, the {falcon,opt}.* hyper-parameters, the powerinfer.* keys and the construction
// record.
void add_ln_metadata(gguf::writer& w, const family_traits& f, const synth_options& o,
                     const geometry& g);

// `name`.weight and `name`.bias, both F32.
void add_norm(gguf::writer& w, const std::string& name, const norm_params& n);

// The tensors of block `layer`: sparse files hold ffn_down_t (opt: with its bias) and the
// predictor, dense ones ffn_down.
void add_ln_layer(gguf::writer& w, const family_traits& f, const ln_layer_weights& lw,
                  int64_t layer, ggml_type type, bool sparse);

} // namespace pi::synth
