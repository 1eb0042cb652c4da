#include "synthetic/ln_output.hpp"

#include <algorithm>

#include "support/error.hpp"
#include "synthetic/gguf_output.hpp"

namespace pi::synth {
namespace {

// Falcon's fused projection: all query rows, then all key rows, then all value rows.
matrix fused_qkv(const ln_layer_weights& lw) {
    matrix qkv(lw.attn_q.rows + lw.attn_k.rows + lw.attn_v.rows, lw.attn_q.cols);
    auto at = qkv.data.begin();
    for (const matrix* m : {&lw.attn_q, &lw.attn_k, &lw.attn_v})
        at = std::copy(m->data.begin(), m->data.end(), at);
    return qkv;
}

void add_weight_and_bias(gguf::writer& w, const std::string& name, const matrix& m,
                         std::span<const float> bias, ggml_type type) {
    add_matrix(w, name + ".weight", m, type);
    add_vector(w, name + ".bias", bias);
}

} // namespace

void add_ln_metadata(gguf::writer& w, const family_traits& f, const synth_options& o,
                     const geometry& g) {
    add_general(w, f, o, g);
    const std::string a = f.file_arch;
    w.set_u32(a + ".context_length", static_cast<uint32_t>(o.n_ctx_train));
    w.set_u32(a + ".embedding_length", static_cast<uint32_t>(g.n_embd));
    w.set_u32(a + ".block_count", static_cast<uint32_t>(g.n_layer));
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(g.n_ff));
    w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(g.n_head));
    w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(g.n_head_kv));
    w.set_f32(a + ".attention.layer_norm_epsilon", o.rms_eps);
    if (f.id != family::opt) {
        w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(g.head_dim));
        w.set_f32(a + ".rope.freq_base", o.rope_freq_base);
    }
    add_powerinfer_keys(w, o);
}

void add_norm(gguf::writer& w, const std::string& name, const norm_params& n) {
    add_vector(w, name + ".weight", n.weight);
    add_vector(w, name + ".bias", n.bias);
}

void add_ln_layer(gguf::writer& w, const family_traits& f, const ln_layer_weights& lw,
                  int64_t layer, ggml_type type, bool sparse) {
    const std::string p = concat("blk.", layer, ".");
    add_norm(w, p + "attn_norm", lw.attn_norm);
    const bool opt = f.id == family::opt;
    if (opt) {
        add_weight_and_bias(w, p + "attn_q", lw.attn_q, lw.q_bias, type);
        add_weight_and_bias(w, p + "attn_k", lw.attn_k, lw.k_bias, type);
        add_weight_and_bias(w, p + "attn_v", lw.attn_v, lw.v_bias, type);
        add_weight_and_bias(w, p + "attn_output", lw.attn_output, lw.output_bias, type);
        add_norm(w, p + "ffn_norm", lw.ffn_norm);
        add_weight_and_bias(w, p + "ffn_up", lw.ffn_up, lw.up_bias, type);
    } else {
        if (f.id == family::falcon_40b) add_norm(w, p + "attn_norm_2", lw.attn_norm_2);
        add_matrix(w, p + "attn_qkv.weight", fused_qkv(lw), type);
        add_matrix(w, p + "attn_output.weight", lw.attn_output, type);
        add_matrix(w, p + "ffn_up.weight", lw.ffn_up, type);
    }
    const std::string down = p + (sparse ? "ffn_down_t" : "ffn_down");
    add_matrix(w, down + ".weight", sparse ? lw.ffn_down_t : transpose(lw.ffn_down_t), type);
    if (opt) add_vector(w, down + ".bias", lw.down_bias);
    if (sparse) {
        add_matrix(w, p + "fc1.weight", lw.fc1, type);
        add_matrix(w, p + "fc2.weight", lw.fc2, type);
    }
}

} // namespace pi::synth
