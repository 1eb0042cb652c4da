#include "engine/device_half.hpp"

namespace pi {

device_half::device_half(const model& m, const offload& off, device& host,
                         const arena& host_tensors, int32_t n_batch)
    : model_(m), offload_(off), host_(host), host_arena_(host_tensors),
      arena_(off.dev(), m, device_arena_spec(n_batch, off.max_hot())),
      lists_(static_cast<size_t>(n_batch) * static_cast<size_t>(m.hp().n_ff)),
      hot_rows_(static_cast<size_t>(n_batch) * static_cast<size_t>(tensors().hot_idx.ne0)),
      hot_counts_(static_cast<size_t>(n_batch)),
      worker_([this](size_t il, int32_t n) { run_hot_neurons(il, n); }) {}

void device_half::upload(size_t offset, const void* src, size_t bytes) {
    offload_.dev().upload(arena_.memory(), offset, src, bytes);
    tally_.count_upload(bytes);
}

void device_half::download(size_t offset, void* dst, size_t bytes) {
    offload_.dev().download(arena_.memory(), offset, dst, bytes);
    tally_.count_download(bytes);
}

void device_half::host_to_device(const pib_tensor& host, const pib_tensor& dev, size_t bytes) {
    upload(dev.offset, host_arena_.host_data() + host.offset, bytes);
}

void device_half::device_to_host(const pib_tensor& dev, const pib_tensor& host, size_t bytes) {
    download(dev.offset, host_arena_.host_data() + host.offset, bytes);
}

void device_half::x_to_host(int32_t n) {
    if (x_on_host_) return;
    offload_.dev().run("synchronize", &pib_vtable::synchronize);
    const pib_tensor& host_x = host_arena_.tensors().x;
    device_to_host(tensors().x, host_x, host_x.nb1 * static_cast<size_t>(n));
    x_on_host_ = true;
}

void device_half::x_to_device(int32_t n) {
    if (x_on_device_) return;
    const pib_tensor& host_x = host_arena_.tensors().x;
    host_to_device(host_x, tensors().x, host_x.nb1 * static_cast<size_t>(n));
    x_on_device_ = true;
}

void device_half::upload_batch(std::span<const int32_t> positions,
                               std::span<const int32_t> cells) {
    upload(tensors().pos.offset, positions.data(), positions.size_bytes());
    upload(tensors().cells.offset, cells.data(), cells.size_bytes());
}

void device_half::lists_to_host(int32_t n, std::span<const int32_t> counts) {
    const arena_tensors& h = host_arena_.tensors();
    const arena_tensors& d = tensors();
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const size_t bytes = sizeof(int32_t) * static_cast<size_t>(counts[tt]);
        device_to_host(
            pib_tensor{d.idx.type, d.idx.ne0, 1, d.idx.nb1, d.mem, d.idx.offset + tt * d.idx.nb1},
            pib_tensor{h.idx.type, h.idx.ne0, 1, h.idx.nb1, h.mem, h.idx.offset + tt * h.idx.nb1},
            bytes);
    }
    host_.upload(host_arena_.memory(), h.count.offset, counts.data(),
                 sizeof(int32_t) * static_cast<size_t>(n));
}

// Device row i is neuron i, so the predictor's lists index the gathered rows directly and
// nothing crosses to the host.
void device_half::device_ffn(size_t il, int32_t n) {
    const offload_layer& l = offload_.layer(il);
    device& dev = offload_.dev();
    const arena_tensors& d = tensors();
    const pib_tensor x = first_rows(d.x, n), xn = first_rows(d.xn, n), idx = first_rows(d.idx, n);
    pib_tensor up = first_rows(d.hot_up, n), gate = first_rows(d.hot_gate, n);
    up.ne0 = gate.ne0 = static_cast<int64_t>(l.hot.size());
    pib_tensor count = d.count;
    count.ne0 = n;
    dev.run("device FFN norm", &pib_vtable::rms_norm, &x, &l.dense.ffn_norm, model_.hp().norm_eps,
            &xn);
    dev.mul_mat_sparse2("device FFN up and gate", l.up, l.gate, xn, idx, count, up, gate);
    dev.run("device FFN activation", &pib_vtable::glu, &gate, &up,
            static_cast<int32_t>(model_.glu()), &up);
    dev.run("device FFN down", &pib_vtable::axpy_sparse, &l.down_t, &up, &idx, &count, &x);
    x_on_host_ = false;
}

// The device's share of a hybrid FFN, on the worker thread: the active hot neurons of every
// token, summed into its own partial output.
void device_half::run_hot_neurons(size_t il, int32_t n) {
    const offload_layer& l = offload_.layer(il);
    device& dev = offload_.dev();
    const arena_tensors& d = tensors();
    const auto k = static_cast<int64_t>(l.hot.size());
    pib_tensor idx = first_rows(d.hot_idx, n), up = first_rows(d.hot_up, n),
               gate = first_rows(d.hot_gate, n);
    idx.ne0 = up.ne0 = gate.ne0 = k; // rows keep the arena's stride, sized for the largest layer
    pib_tensor count = d.hot_count;
    count.ne0 = n;
    const pib_tensor xn = first_rows(d.xn, n), partial = first_rows(d.partial, n);
    dev.mul_mat_sparse2("device FFN up and gate", l.up, l.gate, xn, idx, count, up, gate);
    dev.run("device FFN activation", &pib_vtable::glu, &gate, &up,
            static_cast<int32_t>(model_.glu()), &up);
    dev.run("clearing the device partial sum", &pib_vtable::buffer_clear, d.mem, partial.offset,
            partial.nb1 * static_cast<size_t>(n));
    dev.run("device FFN down", &pib_vtable::axpy_sparse, &l.down_t, &up, &idx, &count, &partial);
    dev.run("device synchronize", &pib_vtable::synchronize);
}

// The lists are divided into hot (device) and cold (CPU) neurons, both halves run at once, then
// the device's partial sum is added to x.
void device_half::hybrid_ffn(size_t il, int32_t n, bool lists_on_device,
                             std::span<int32_t> counts) {
    const arena_tensors& h = host_arena_.tensors();
    const arena_tensors& d = tensors();
    const layer_weights& w = model_.layers()[il];
    const offload_layer& l = offload_.layer(il);
    const auto ff = static_cast<size_t>(model_.hp().n_ff);
    const auto dim = static_cast<size_t>(model_.hp().n_embd);
    const size_t k_stride = static_cast<size_t>(d.hot_idx.ne0);
    const pib_tensor x = first_rows(h.x, n), xn = first_rows(h.xn, n), u = first_rows(h.u, n),
                     g = first_rows(h.g, n), idx = first_rows(h.idx, n);
    pib_tensor count = h.count;
    count.ne0 = n;

    bool any_hot = false;
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const int32_t total = counts[tt];
        int32_t* list = lists_.data() + tt * ff;
        const size_t list_bytes = sizeof(int32_t) * static_cast<size_t>(total);
        if (lists_on_device)
            download(d.idx.offset + tt * d.idx.nb1, list, list_bytes);
        else
            host_.download(host_arena_.memory(), h.idx.offset + tt * h.idx.nb1, list, list_bytes);
        int32_t cold = 0, hot = 0;
        for (int32_t j = 0; j < total; ++j) {
            const int32_t row = l.device_row[static_cast<size_t>(list[j])];
            if (row >= 0)
                hot_rows_[tt * k_stride + static_cast<size_t>(hot++)] = row;
            else
                list[cold++] = list[j];
        }
        counts[tt] = cold;
        hot_counts_[tt] = hot;
        any_hot = any_hot || hot > 0;
        host_.upload(host_arena_.memory(), h.idx.offset + tt * h.idx.nb1, list,
                     sizeof(int32_t) * static_cast<size_t>(cold));
    }
    host_.upload(host_arena_.memory(), h.count.offset, counts.data(),
                 sizeof(int32_t) * static_cast<size_t>(n));
    if (any_hot) {
        host_to_device(h.xn, d.xn, h.xn.nb1 * static_cast<size_t>(n));
        upload(d.hot_idx.offset, hot_rows_.data(),
               sizeof(int32_t) * k_stride * static_cast<size_t>(n));
        upload(d.hot_count.offset, hot_counts_.data(), sizeof(int32_t) * static_cast<size_t>(n));
        worker_.start(il, n);
    }
    try {
        host_.mul_mat_sparse2("sparse FFN up and gate (cold)", w.up, w.gate, xn, idx, count, u, g);
        host_.run("FFN activation", &pib_vtable::glu, &g, &u, static_cast<int32_t>(model_.glu()),
                  &u);
        host_.run("sparse FFN down (cold)", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count,
                  &x);
    } catch (...) {
        if (any_hot) worker_.wait();
        throw;
    }
    if (!any_hot) return;
    worker_.wait();
    const pib_tensor tmp = first_rows(h.tmp, n);
    device_to_host(d.partial, h.tmp, sizeof(float) * dim * static_cast<size_t>(n));
    host_.run("merging the device partial sum", &pib_vtable::add, &x, &tmp, &x);
}

} // namespace pi
