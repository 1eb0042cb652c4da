// The attention block of a layer, on the host or, where the planner placed it, on the offload
// device; its scores are computed where the layer's KV cache is.
#include <cmath>
#include <utility>

#include "engine/block_ops.hpp"
#include "engine/context.hpp"
#include "engine/device_half.hpp"
#include "engine/offload.hpp"

namespace pi {

pib_tensor context::attention_input(device& dev, const arena_tensors& a, const layer_weights& w,
                                    int32_t n) {
    const hparams& h = model_.hp();
    if (h.arch->block == block_kind::parallel)
        return first_rows(present(w.attn_norm_2) ? a.att : a.xn, n); // parallel_norms made it
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n);
    apply_norm(dev, "attention norm", h, x, w.attn_norm, w.attn_norm_b, xn);
    return xn;
}

void context::parallel_norms(size_t il, int32_t n) {
    const layer_weights& w = model_.layers()[il];
    if (!present(w.attn_norm_2)) return; // the attention reads the FFN's input
    const arena_tensors& a = host_.tensors();
    x_to_host(n);
    apply_norm(*cpu_, "attention norm", model_.hp(), first_rows(a.x, n), w.attn_norm_2,
               w.attn_norm_2_b, first_rows(a.att, n));
}

void context::project_qkv(device& dev, const arena_tensors& a, const layer_weights& w, int32_t n,
                          const pib_tensor& in) {
    const hparams& h = model_.hp();
    const pib_tensor q = first_rows(a.q, n), k = first_rows(a.k, n), v = first_rows(a.v, n);
    pib_tensor pos = a.pos;
    pos.ne0 = n;
    dev.run("Q projection", &pib_vtable::mul_mat, &w.wq, &in, &q);
    dev.run("K projection", &pib_vtable::mul_mat, &w.wk, &in, &k);
    dev.run("V projection", &pib_vtable::mul_mat, &w.wv, &in, &v);
    add_bias(dev, "Q bias", q, w.bq);
    add_bias(dev, "K bias", k, w.bk);
    add_bias(dev, "V bias", v, w.bv);
    if (!h.arch->uses_rope) return;
    const pib_rope_params rq{h.n_head,          h.head_dim,       h.n_rot,
                             h.arch->rope_mode, h.rope_freq_base, h.rope_freq_scale};
    const pib_rope_params rk{h.n_head_kv,       h.head_dim,       h.n_rot,
                             h.arch->rope_mode, h.rope_freq_base, h.rope_freq_scale};
    dev.run("RoPE of Q", &pib_vtable::rope, &q, &pos, &rq);
    dev.run("RoPE of K", &pib_vtable::rope, &k, &pos, &rk);
}

void context::store_and_attend(device& dev, const arena_tensors& a, size_t il, int32_t n) {
    const hparams& h = model_.hp();
    const pib_tensor k = first_rows(a.k, n), v = first_rows(a.v, n);
    pib_tensor cells = a.cells;
    cells.ne0 = n;
    const kv_cache::layer_cells& cache = kv_.layer(il);
    dev.run("storing K", &pib_vtable::set_rows, &k, &cells, &cache.k);
    dev.run("storing V", &pib_vtable::set_rows, &v, &cells, &cache.v);
    const int32_t n_kv = kv_.on_device(il) ? kv_.device_span() : kv_.span();
    const pib_attention_params ap{h.n_head, h.n_head_kv, h.head_dim, n_kv,
                                  1.0f / std::sqrt(static_cast<float>(h.head_dim))};
    // Each run of tokens of one sequence attends over that sequence's view of the cells.
    for (int32_t t0 = 0; t0 < n;) {
        const int32_t seq = batch_seq_[static_cast<size_t>(t0)];
        int32_t t1 = t0 + 1;
        while (t1 < n && batch_seq_[static_cast<size_t>(t1)] == seq)
            ++t1;
        const pib_tensor q = row_range(a.q, t0, t1), att = row_range(a.att, t0, t1);
        pib_tensor pos = a.pos;
        pos.offset += static_cast<size_t>(t0) * sizeof(int32_t);
        pos.ne0 = t1 - t0;
        const pib_tensor cell_pos =
            kv_.on_device(il) ? kv_.device_positions(seq) : kv_.host_positions(seq);
        dev.run("attention", &pib_vtable::attention, &q, &cache.k, &cache.v, &pos, &cell_pos, &ap,
                &att);
        t0 = t1;
    }
}

void context::project_out(device& dev, const arena_tensors& a, const layer_weights& w, int32_t n) {
    const pib_tensor x = first_rows(a.x, n), att = first_rows(a.att, n), tmp = first_rows(a.tmp, n);
    dev.run("attention output projection", &pib_vtable::mul_mat, &w.wo, &att, &tmp);
    add_bias(dev, "attention output bias", tmp, w.bo);
    dev.run("attention residual", &pib_vtable::add, &x, &tmp, &x);
}

void context::attention_block(size_t il, int32_t n) {
    const layer_weights& w = model_.layers()[il];
    const offload_layer* placed = offloaded_layer(il);
    if (placed && placed->has_attn()) {
        device_half& half = *offload_half_;
        const arena_tensors& d = half.tensors();
        const arena_tensors& a = host_.tensors();
        x_to_device(n);
        project_qkv(half.dev(), d, placed->dense, n,
                    attention_input(half.dev(), d, placed->dense, n));
        if (kv_.on_device(il)) {
            store_and_attend(half.dev(), d, il, n);
        } else {
            // Attention scores where the KV cache is: Q, K and V come over, the result goes back.
            half.dev().run("synchronize", &pib_vtable::synchronize);
            for (auto [on_device, on_host] :
                 {std::pair{&d.q, &a.q}, std::pair{&d.k, &a.k}, std::pair{&d.v, &a.v}})
                half.device_to_host(*on_device, *on_host, on_device->nb1 * static_cast<size_t>(n));
            store_and_attend(*cpu_, a, il, n);
            half.host_to_device(a.att, d.att, d.att.nb1 * static_cast<size_t>(n));
        }
        project_out(half.dev(), d, placed->dense, n);
        half.x_changed_on_device();
    } else {
        x_to_host(n);
        project_qkv(*cpu_, host_.tensors(), w, n, attention_input(*cpu_, host_.tensors(), w, n));
        store_and_attend(*cpu_, host_.tensors(), il, n);
        project_out(*cpu_, host_.tensors(), w, n);
        if (offload_half_) offload_half_->x_changed_on_host();
    }
    if (n == 1)
        counters_.add_decode_bytes(bytes_of(w.attn_norm) + bytes_of(w.attn_norm_2) +
                                   bytes_of(w.wq) + bytes_of(w.wk) + bytes_of(w.wv) +
                                   bytes_of(w.wo) + kv_.bytes_read_per_layer());
}

} // namespace pi
