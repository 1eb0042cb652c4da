#pragma once
// The steps whose form depends on the architecture (docs/forward-pass.md): its norm, the biases a
// file may carry, the FFN's input and its activation. One definition for the host, the offload
// device and the predictor audit.
#include "backend/device.hpp"
#include "model/model.hpp"

namespace pi {

// y = the architecture's norm of x with weight w: RMSNorm, or LayerNorm plus b where present.
void apply_norm(device& dev, const char* what, const hparams& h, const pib_tensor& x,
                const pib_tensor& w, const pib_tensor& b, const pib_tensor& y);

// x[t] += b where the file has the bias; with lists, only at the listed neurons.
void add_bias(device& dev, const char* what, const pib_tensor& x, const pib_tensor& b,
              const pib_tensor* idx = nullptr, const pib_tensor* count = nullptr);

// xn = the FFN input from x: ffn_norm of the post-attention residual, or for a parallel block
// (Falcon) attn_norm of the layer input.
void ffn_input(device& dev, const hparams& h, const layer_weights& w, const pib_tensor& x,
               const pib_tensor& xn);

// u = the activation from u = up·xn (and g = gate·xn in a gated FFN), with the up bias at the
// listed neurons (all when idx is null).
void ffn_activation(device& dev, const model& m, const layer_weights& w, const pib_tensor& g,
                    const pib_tensor& u, const pib_tensor* idx = nullptr,
                    const pib_tensor* count = nullptr);

} // namespace pi
