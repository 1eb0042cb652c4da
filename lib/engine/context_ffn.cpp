// The FFN block of a layer: dense, or sparse over the predictor's lists, computed on the host, on
// the offload device, or split between them (docs/forward-pass.md).
#include <algorithm>
#include <numeric>

#include "engine/block_ops.hpp"
#include "engine/context.hpp"
#include "engine/device_half.hpp"
#include "engine/offload.hpp"

namespace pi {

void context::predict(device& dev, const arena_tensors& a, const layer_weights& w, int32_t n) {
    const pib_tensor x = first_rows(a.x, n), p = first_rows(a.p, n), idx = first_rows(a.idx, n);
    const pib_tensor hidden{static_cast<uint32_t>(ggml_type::f32),
                            w.predictor_rank,
                            n,
                            row_bytes(ggml_type::f32, w.predictor_rank),
                            a.mem,
                            a.predictor_hidden_offset};
    pib_tensor count = a.count;
    count.ne0 = n;
    // The predictor reads the residual before ffn_norm (docs/file-format.md).
    dev.run("predictor fc1", &pib_vtable::mul_mat, &w.fc1, &x, &hidden);
    dev.run("predictor ReLU", &pib_vtable::relu, &hidden, &hidden);
    dev.run("predictor fc2", &pib_vtable::mul_mat, &w.fc2, &hidden, &p);
    dev.run("selecting active neurons", &pib_vtable::select_active, &p, model_.sparse_threshold(),
            &idx, &count);
    dev.run("synchronize", &pib_vtable::synchronize);
    dev.run("downloading active counts", &pib_vtable::buffer_download, a.mem, a.count.offset,
            active_counts_.data(), sizeof(int32_t) * static_cast<size_t>(n));
}

void context::ffn_block(size_t il, int32_t n) {
    if (model_.sparse_inference())
        sparse_ffn(il, n);
    else
        dense_ffn(il, n);
}

void context::sparse_ffn(size_t il, int32_t n) {
    const arena_tensors& a = host_.tensors();
    const hparams& h = model_.hp();
    const layer_weights& w = model_.layers()[il];
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), u = first_rows(a.u, n),
                     g = first_rows(a.g, n), idx = first_rows(a.idx, n);
    pib_tensor count = a.count;
    count.ne0 = n;
    const std::span<int32_t> counts(active_counts_.data(), static_cast<size_t>(n));

    // The predictor runs where the layer's hot rows are, unless the audit or the calibration
    // counts need its lists on the host (docs/hybrid.md).
    const offload_layer* placed = offloaded_layer(il);
    const bool predict_on_device =
        placed && placed->has_predictor() && !counters_.need_lists_on_host();
    const bool any_hot = placed && !placed->hot.empty();
    const auto sum = [](std::span<const int32_t> c) {
        return std::accumulate(c.begin(), c.end(), uint64_t{0});
    };
    if (predict_on_device && any_hot && !placed->all_hot(h.n_ff)) {
        x_to_device(n);
        // counts: the cold lists'; the hot lists' lengths stay on the device until the batch
        // ends.
        offload_half_->predicted_hybrid_ffn(il, n, counts, next_block_on_device(il));
        pending_ffn_.push_back({il, n, sum(counts)});
        return;
    }
    if (predict_on_device) {
        x_to_device(n);
        offload_half_->predict(il, n, counts); // counts: the cold lists'
    } else {
        x_to_host(n);
        predict(*cpu_, a, w, n);
    }
    const uint64_t listed = sum(counts); // every list, or none when the device holds them all
    if (!predict_on_device) counters_.add_lists(*cpu_, host_, il, n, counts);
    if (predict_on_device && any_hot) { // every neuron is hot
        if (placed->has_ffn_norm())
            offload_half_->device_ffn(il, n);
        else
            offload_half_->hybrid_ffn(il, n, true, next_block_on_device(il), counts);
        pending_ffn_.push_back({il, n, listed});
        return;
    }
    if (any_hot && offload_half_->split_host_lists(il, n, counts)) {
        offload_half_->hybrid_ffn(il, n, false, next_block_on_device(il), counts);
        account_ffn(il, n, listed, listed);
        return;
    }
    // Every listed neuron is the CPU's.
    x_to_host(n);
    ffn_input(*cpu_, h, w, x, xn);
    if (present(w.gate))
        cpu_->mul_mat_sparse2("sparse FFN up and gate", w.up, w.gate, xn, idx, count, u, g);
    else
        cpu_->run("sparse FFN up", &pib_vtable::mul_mat_sparse, &w.up, &xn, &idx, &count, &u);
    ffn_activation(*cpu_, model_, w, g, u, &idx, &count);
    observe_ffn(il, n);
    cpu_->run("sparse FFN down", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count, &x);
    add_bias(*cpu_, "FFN down bias", x, w.down_b);
    if (offload_half_) offload_half_->x_changed_on_host();
    // Rows of ffn_down_t a decoded token reads: the accumulate skips listed rows whose
    // activation is zero (a predictor's false positives).
    account_ffn(il, n, listed, n == 1 ? nonzero_activations() : listed);
}

// A hybrid or device layer counts every listed row of ffn_down_t as read.
void context::account_ffn(size_t il, int32_t n, uint64_t active, uint64_t down_rows) {
    const layer_weights& w = model_.layers()[il];
    counters_.add_ffn(il, n, active);
    if (n == 1)
        counters_.add_decode_bytes(bytes_of(w.ffn_norm) + bytes_of(w.fc1) + bytes_of(w.fc2) +
                                   active * (w.up.nb1 + w.gate.nb1) + down_rows * w.down_t.nb1);
}

void context::settle_device_counts(int32_t n) {
    if (pending_ffn_.empty()) return;
    offload_half_->fetch_layer_counts(n);
    for (const pending_ffn& p : pending_ffn_) {
        const uint64_t active = p.host_active + offload_half_->device_active(p.layer, n);
        account_ffn(p.layer, p.n_tokens, active, active);
    }
    pending_ffn_.clear();
}

bool context::next_block_on_device(size_t il) const noexcept {
    const offload* off = options_.offloaded;
    if (il + 1 < off->n_layers()) return off->layer(il + 1).has_attn();
    return off->has_output();
}

void context::dense_ffn(size_t il, int32_t n) {
    const arena_tensors& a = host_.tensors();
    const hparams& h = model_.hp();
    const layer_weights& w = model_.layers()[il];
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), u = first_rows(a.u, n),
                     g = first_rows(a.g, n);
    ffn_input(*cpu_, h, w, x, xn);
    cpu_->run("FFN up", &pib_vtable::mul_mat, &w.up, &xn, &u);
    if (present(w.gate)) cpu_->run("FFN gate", &pib_vtable::mul_mat, &w.gate, &xn, &g);
    ffn_activation(*cpu_, model_, w, g, u);
    observe_ffn(il, n);
    uint64_t down_bytes = bytes_of(w.down);
    if (model_.sparse_file()) {
        // Forced dense mode on a sparse file: the down projection runs over every row of
        // ffn_down_t.
        const pib_tensor idx = first_rows(a.all_idx, n);
        pib_tensor count = a.all_count;
        count.ne0 = n;
        cpu_->run("FFN down (all neurons)", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count,
                  &x);
        // The accumulate skips the rows whose activation is zero (most of them after a ReLU)
        // and never reads them.
        if (n == 1) down_bytes = nonzero_activations() * w.down_t.nb1;
    } else {
        const pib_tensor tmp = first_rows(a.tmp, n);
        cpu_->run("FFN down", &pib_vtable::mul_mat, &w.down, &u, &tmp);
        cpu_->run("FFN residual", &pib_vtable::add, &x, &tmp, &x);
    }
    add_bias(*cpu_, "FFN down bias", x, w.down_b);
    counters_.add_ffn(il, n, static_cast<uint64_t>(n) * static_cast<uint64_t>(h.n_ff));
    if (n == 1)
        counters_.add_decode_bytes(bytes_of(w.ffn_norm) + bytes_of(w.up) + bytes_of(w.gate) +
                                   down_bytes);
}

uint64_t context::nonzero_activations() {
    cpu_->run("synchronize", &pib_vtable::synchronize);
    const float* act = host_.host_rows<float>(host_.tensors().u);
    return static_cast<uint64_t>(
        std::count_if(act, act + model_.hp().n_ff, [](float v) { return v != 0.0f; }));
}

} // namespace pi
