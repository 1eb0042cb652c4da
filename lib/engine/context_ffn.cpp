// The FFN block of a layer: dense, or sparse over the predictor's lists, computed on the host, on
// the offload device, or split between them (docs/forward-pass.md).
#include <algorithm>

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
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(n);
    dev.run("synchronize", &pib_vtable::synchronize);
    if (offload_half_ && &dev == &offload_half_->dev()) {
        offload_half_->download(a.count.offset, active_counts_.data(), bytes);
        return;
    }
    dev.run("downloading active counts", &pib_vtable::buffer_download, a.mem, a.count.offset,
            active_counts_.data(), bytes);
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

    const offload_layer* placed = offloaded_layer(il);
    const bool predict_on_device =
        placed && placed->has_predictor() && !counters_.need_lists_on_host();
    if (predict_on_device) {
        x_to_device(n);
        predict(offload_half_->dev(), offload_half_->tensors(), placed->dense, n);
    } else {
        x_to_host(n);
        predict(*cpu_, a, w, n);
    }
    uint64_t active = 0;
    for (int32_t c : counts)
        active += static_cast<uint64_t>(c);
    // Rows of ffn_down_t a decoded token reads: the accumulate skips listed rows whose activation
    // is zero (a predictor's false positives); counted where the whole FFN runs on the host (a
    // hybrid or device layer counts every listed row).
    uint64_t down_rows = active;
    counters_.add_lists(*cpu_, host_, il, n, counts);
    if (predict_on_device && placed->all_hot(h.n_ff) && placed->has_ffn_norm()) {
        offload_half_->device_ffn(il, n);
    } else if (placed && !placed->hot.empty()) {
        x_to_host(n);
        ffn_input(*cpu_, h, w, x, xn);
        offload_half_->hybrid_ffn(il, n, predict_on_device, counts);
        offload_half_->x_changed_on_host();
    } else {
        if (predict_on_device) offload_half_->lists_to_host(n, counts);
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
        if (n == 1) down_rows = nonzero_activations();
    }
    counters_.add_ffn(il, n, active);
    if (n == 1)
        counters_.add_decode_bytes(bytes_of(w.ffn_norm) + bytes_of(w.fc1) + bytes_of(w.fc2) +
                                   active * (w.up.nb1 + w.gate.nb1) + down_rows * w.down_t.nb1);
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
