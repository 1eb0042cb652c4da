#include "synthetic/gguf_output.hpp"

#include <array>
#include <utility>
#include <vector>

#include "quant/types.hpp"
#include "support/error.hpp"

namespace pi::synth {
namespace {

// Through the type table's converters (F32 or F16 here).
std::vector<uint8_t> encode(std::span<const float> values, ggml_type type) {
    std::vector<uint8_t> bytes(row_bytes(type, static_cast<int64_t>(values.size())));
    if (!quantize_row(type, values, bytes))
        fail(status::internal, "synthetic model: no converter to ", traits_of(type).name);
    return bytes;
}

} // namespace

void add_matrix(gguf::writer& w, std::string name, const matrix& m, ggml_type type) {
    const std::array<int64_t, 2> dims{m.cols, m.rows};
    w.add_tensor(std::move(name), type, dims, encode(m.data, type));
}

void add_vector(gguf::writer& w, std::string name, std::span<const float> v) {
    const std::array<int64_t, 1> dims{static_cast<int64_t>(v.size())};
    w.add_tensor(std::move(name), ggml_type::f32, dims, encode(v, ggml_type::f32));
}

void add_hparams(gguf::writer& w, const std::string& a, const synth_options& o, const geometry& g,
                 int64_t n_layer) {
    w.set_u32(a + ".context_length", static_cast<uint32_t>(o.n_ctx_train));
    w.set_u32(a + ".embedding_length", static_cast<uint32_t>(g.n_embd));
    w.set_u32(a + ".block_count", static_cast<uint32_t>(n_layer));
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(g.n_ff));
    w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(g.n_head));
    w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(g.n_head_kv));
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", o.rms_eps);
    w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(g.head_dim));
    w.set_f32(a + ".rope.freq_base", o.rope_freq_base);
}

void add_general(gguf::writer& w, const family_traits& f, const synth_options& o,
                 const geometry& g) {
    w.set_string("general.architecture", f.file_arch);
    w.set_string("general.name", concat("synthetic-", f.name, "-", g.n_embd, "x", g.n_layer));
    w.set_u32("general.file_type", o.weight_type == ggml_type::f16 ? 1u : 0u);
}

void add_powerinfer_keys(gguf::writer& w, const synth_options& o) {
    if (o.sparse) w.set_f32("powerinfer.sparse_threshold", 0.0f);
    if (!o.sparse && o.dense_relu) w.set_string("powerinfer.ffn_activation", "relu");
    w.set_u64("powerinfer.synthetic.seed", o.seed);
    w.set_f32("powerinfer.synthetic.sparsity", o.sparsity);
    w.set_f32("powerinfer.synthetic.power_law", o.power_law);
    w.set_f32("powerinfer.synthetic.predictor_noise", o.predictor_noise);
}

void add_metadata(gguf::writer& w, const synth_options& o, const geometry& g) {
    const family_traits& f = family_named(o.arch);
    add_general(w, f, o, g);
    add_hparams(w, f.file_arch, o, g, g.n_layer);
    add_powerinfer_keys(w, o);
}

void add_layer(gguf::writer& w, const layer_weights& lw, int64_t layer, ggml_type type,
               bool sparse) {
    add_attention(w, lw, layer, type);
    add_ffn(w, lw, layer, type, sparse);
}

void add_attention(gguf::writer& w, const layer_weights& lw, int64_t layer, ggml_type type) {
    const std::string p = concat("blk.", layer, ".");
    add_vector(w, p + "attn_norm.weight", lw.attn_norm);
    add_matrix(w, p + "attn_q.weight", lw.attn_q, type);
    add_matrix(w, p + "attn_k.weight", lw.attn_k, type);
    add_matrix(w, p + "attn_v.weight", lw.attn_v, type);
    add_matrix(w, p + "attn_output.weight", lw.attn_output, type);
}

void add_ffn(gguf::writer& w, const layer_weights& lw, int64_t layer, ggml_type type, bool sparse) {
    const std::string p = concat("blk.", layer, ".");
    add_vector(w, p + "ffn_norm.weight", lw.ffn_norm);
    add_matrix(w, p + "ffn_gate.weight", lw.ffn_gate, type);
    add_matrix(w, p + "ffn_up.weight", lw.ffn_up, type);
    if (sparse) {
        add_matrix(w, p + "ffn_down_t.weight", lw.ffn_down_t, type);
        add_matrix(w, p + "fc1.weight", lw.fc1, type);
        add_matrix(w, p + "fc2.weight", lw.fc2, type);
    } else {
        add_matrix(w, p + "ffn_down.weight", transpose(lw.ffn_down_t), type);
    }
}

} // namespace pi::synth
