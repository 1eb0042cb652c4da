#pragma once
// The synthetic model's tensors and keys in a GGUF writer (docs/synthetic-models.md, "What the
// file contains").
#include <cstdint>
#include <span>
#include <string>

#include "gguf/gguf.hpp"
#include "synthetic/construction.hpp"
#include "synthetic/family.hpp"

namespace pi::synth {

void add_matrix(gguf::writer& w, std::string name, const matrix& m, ggml_type type);
void add_vector(gguf::writer& w, std::string name, std::span<const float> v); // always F32

// The llama-style hyper-parameters for a model of `n_layer` blocks (the {arch}.* keys of the
// file architecture `arch`; general.architecture is the caller's).
void add_hparams(gguf::writer& w, const std::string& arch, const synth_options& o,
                 const geometry& g, int64_t n_layer);

// general.architecture (the family's file architecture), general.name, general.file_type.
void add_general(gguf::writer& w, const family_traits& f, const synth_options& o,
                 const geometry& g);
// powerinfer.sparse_threshold or powerinfer.ffn_activation, and the construction record.
void add_powerinfer_keys(gguf::writer& w, const synth_options& o);

// Everything but the tensors and the tokenizer of a llama-style family: general.*, the
// hyper-parameters, the powerinfer.* keys and the construction record.
void add_metadata(gguf::writer& w, const synth_options& o, const geometry& g);

// The tensors of block `layer`: sparse files hold ffn_down_t and the predictor, dense ones
// ffn_down. add_layer is add_attention then add_ffn.
void add_layer(gguf::writer& w, const layer_weights& lw, int64_t layer, ggml_type type,
               bool sparse);
void add_attention(gguf::writer& w, const layer_weights& lw, int64_t layer, ggml_type type);
void add_ffn(gguf::writer& w, const layer_weights& lw, int64_t layer, ggml_type type, bool sparse);

} // namespace pi::synth
