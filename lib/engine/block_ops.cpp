#include "engine/block_ops.hpp"

namespace pi {

void apply_norm(device& dev, const char* what, const hparams& h, const pib_tensor& x,
                const pib_tensor& w, const pib_tensor& b, const pib_tensor& y) {
    if (h.arch->norm == norm_kind::rms) {
        dev.run(what, &pib_vtable::rms_norm, &x, &w, h.norm_eps, &y);
        return;
    }
    const pib_tensor* bias = present(b) ? &b : nullptr;
    dev.run(what, &pib_vtable::layer_norm, &x, &w, bias, h.norm_eps, &y);
}

void add_bias(device& dev, const char* what, const pib_tensor& x, const pib_tensor& b,
              const pib_tensor* idx, const pib_tensor* count) {
    if (present(b)) dev.run(what, &pib_vtable::add_row, &x, &b, idx, count);
}

void ffn_input(device& dev, const hparams& h, const layer_weights& w, const pib_tensor& x,
               const pib_tensor& xn) {
    if (h.arch->ffn_norm)
        apply_norm(dev, "FFN norm", h, x, w.ffn_norm, w.ffn_norm_b, xn);
    else
        apply_norm(dev, "attention and FFN norm", h, x, w.attn_norm, w.attn_norm_b, xn);
}

void ffn_activation(device& dev, const model& m, const layer_weights& w, const pib_tensor& g,
                    const pib_tensor& u, const pib_tensor* idx, const pib_tensor* count) {
    if (m.hp().arch->gated_ffn) {
        dev.run("FFN activation", &pib_vtable::glu, &g, &u, static_cast<int32_t>(m.glu()), &u);
        return;
    }
    add_bias(dev, "FFN up bias", u, w.up_b, idx, count);
    dev.run("FFN activation", &pib_vtable::relu, &u, &u);
}

} // namespace pi
