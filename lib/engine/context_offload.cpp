// The offload device's side of a context: moving the residual stream, the FFN of layers that run
// wholly on the device, and the hybrid FFN whose hot half runs on the device while the CPU
// computes the cold half (spec §4.2).
#include "engine/context.hpp"
#include "engine/context_arena.hpp"
#include "engine/offload.hpp"

namespace pi {

const offload_layer* context::offloaded_layer(size_t il) const noexcept {
    return options_.offloaded ? &options_.offloaded->layer(il) : nullptr;
}

void context::host_to_device(const pib_tensor& host, const pib_tensor& dev, size_t bytes) {
    options_.offloaded->dev().upload(device_arena_, dev.offset, host_base_ + host.offset, bytes);
}

void context::device_to_host(const pib_tensor& dev, const pib_tensor& host, size_t bytes) {
    options_.offloaded->dev().download(device_arena_, dev.offset, host_base_ + host.offset, bytes);
}

void context::x_to_host(int32_t n) {
    if (x_on_host_) return;
    options_.offloaded->dev().run("synchronize", &pib_vtable::synchronize);
    device_to_host(dl_->x, at_->x, at_->x.nb1 * static_cast<size_t>(n));
    x_on_host_ = true;
}

void context::x_to_device(int32_t n) {
    if (x_on_device_) return;
    host_to_device(at_->x, dl_->x, at_->x.nb1 * static_cast<size_t>(n));
    x_on_device_ = true;
}

// Positions of the batch, and the cache's cell positions where device attention reads them.
void context::upload_positions(int32_t n) {
    const arena_layout& a = *at_;
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(n);
    dev_->upload(arena_, a.pos.offset, pos_host_.data(), bytes);
    dev_->upload(arena_, a.kv_pos.offset, kv_pos_host_.data(),
                 kv_pos_host_.size() * sizeof(int32_t));
    if (!dl_) return;
    device& dd = options_.offloaded->dev();
    dd.upload(device_arena_, dl_->pos.offset, pos_host_.data(), bytes);
    if (kv_dev_)
        dd.upload(device_kv_, dl_->kv_pos.offset, kv_pos_host_.data(),
                  kv_pos_host_.size() * sizeof(int32_t));
}

// The device predicted; the CPU computes the layer's FFN and needs the lists.
void context::lists_to_host(int32_t n) {
    const arena_layout& a = *at_;
    const arena_layout& d = *dl_;
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const size_t bytes = sizeof(int32_t) * static_cast<size_t>(counts_host_[tt]);
        device_to_host(
            pib_tensor{d.idx.type, d.idx.ne0, 1, d.idx.nb1, d.mem, d.idx.offset + tt * d.idx.nb1},
            pib_tensor{a.idx.type, a.idx.ne0, 1, a.idx.nb1, a.mem, a.idx.offset + tt * a.idx.nb1},
            bytes);
    }
    dev_->upload(arena_, a.count.offset, counts_host_.data(),
                 sizeof(int32_t) * static_cast<size_t>(n));
}

// A layer whose every neuron is on the device, predicted there: device row i is neuron i, so
// the predictor's lists index the gathered rows directly and nothing crosses to the host.
void context::device_ffn(size_t il, int32_t n) {
    const offload_layer& l = options_.offloaded->layer(il);
    device& dd = options_.offloaded->dev();
    const arena_layout& d = *dl_;
    const pib_tensor x = first_rows(d.x, n), xn = first_rows(d.xn, n), idx = first_rows(d.idx, n);
    pib_tensor up = first_rows(d.hot_up, n), gate = first_rows(d.hot_gate, n);
    up.ne0 = gate.ne0 = static_cast<int64_t>(l.hot.size());
    pib_tensor count = d.count;
    count.ne0 = n;
    dd.run("device FFN norm", &pib_vtable::rms_norm, &x, &l.dense.ffn_norm, model_.hp().rms_eps,
           &xn);
    dd.mul_mat_sparse2("device FFN up and gate", l.up, l.gate, xn, idx, count, up, gate);
    dd.run("device FFN activation", &pib_vtable::glu, &gate, &up,
           static_cast<int32_t>(model_.glu()), &up);
    dd.run("device FFN down", &pib_vtable::axpy_sparse, &l.down_t, &up, &idx, &count, &x);
    x_on_host_ = false;
}

void context::worker_loop() {
    for (;;) {
        std::unique_lock lock(worker_mutex_);
        worker_cv_.wait(lock, [this] { return worker_has_job_ || worker_stop_; });
        if (worker_stop_) return;
        lock.unlock();
        std::exception_ptr error;
        try {
            device_half(job_layer_, job_tokens_);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        worker_error_ = error;
        worker_has_job_ = false;
        lock.unlock();
        worker_cv_.notify_all();
    }
}

void context::start_device_half(size_t il, int32_t n) {
    {
        std::lock_guard lock(worker_mutex_);
        job_layer_ = il;
        job_tokens_ = n;
        worker_has_job_ = true;
    }
    worker_cv_.notify_all();
}

void context::wait_device_half() {
    std::unique_lock lock(worker_mutex_);
    worker_cv_.wait(lock, [this] { return !worker_has_job_; });
    if (worker_error_) std::rethrow_exception(std::exchange(worker_error_, nullptr));
}

// The device's share of a hybrid FFN: the active hot neurons of every token, summed into its own
// partial output (spec §4.2: the device holds gathered rows; the CPU adds the two halves).
void context::device_half(size_t il, int32_t n) {
    const offload_layer& l = options_.offloaded->layer(il);
    device& dd = options_.offloaded->dev();
    const arena_layout& d = *dl_;
    const auto k = static_cast<int64_t>(l.hot.size());
    pib_tensor idx = first_rows(d.hot_idx, n), up = first_rows(d.hot_up, n),
               gate = first_rows(d.hot_gate, n);
    idx.ne0 = up.ne0 = gate.ne0 = k; // rows keep the arena's stride, sized for the largest layer
    pib_tensor count = d.hot_count;
    count.ne0 = n;
    const pib_tensor xn = first_rows(d.xn, n), partial = first_rows(d.partial, n);
    dd.mul_mat_sparse2("device FFN up and gate", l.up, l.gate, xn, idx, count, up, gate);
    dd.run("device FFN activation", &pib_vtable::glu, &gate, &up,
           static_cast<int32_t>(model_.glu()), &up);
    dd.run("clearing the device partial sum", &pib_vtable::buffer_clear, d.mem, partial.offset,
           partial.nb1 * static_cast<size_t>(n));
    dd.run("device FFN down", &pib_vtable::axpy_sparse, &l.down_t, &up, &idx, &count, &partial);
    dd.run("device synchronize", &pib_vtable::synchronize);
}

// Sparse FFN split between the CPU and the offload device, with xn = ffn_norm(x) on the host:
// the predictor's lists (in the host arena, or the device's when it predicted) are divided into
// hot (device) and cold (CPU) neurons, both halves run at once, then the partial sums add.
void context::hybrid_ffn(size_t il, int32_t n, bool lists_on_device) {
    const arena_layout& a = *at_;
    const arena_layout& d = *dl_;
    const layer_weights& w = model_.layers()[il];
    const offload_layer& l = options_.offloaded->layer(il);
    device& dv = *dev_;
    device& dd = options_.offloaded->dev();
    const auto ff = static_cast<size_t>(model_.hp().n_ff);
    const auto dim = static_cast<size_t>(model_.hp().n_embd);
    const size_t k_stride = static_cast<size_t>(d.hot_idx.ne0);
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), u = first_rows(a.u, n),
                     g = first_rows(a.g, n), idx = first_rows(a.idx, n);
    pib_tensor count = a.count;
    count.ne0 = n;

    bool any_hot = false;
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const int32_t total = counts_host_[tt];
        int32_t* list = idx_host_.data() + tt * ff;
        const size_t list_bytes = sizeof(int32_t) * static_cast<size_t>(total);
        if (lists_on_device)
            dd.download(device_arena_, d.idx.offset + tt * d.idx.nb1, list, list_bytes);
        else
            dv.download(arena_, a.idx.offset + tt * a.idx.nb1, list, list_bytes);
        int32_t cold = 0, hot = 0;
        for (int32_t j = 0; j < total; ++j) {
            const int32_t row = l.device_row[static_cast<size_t>(list[j])];
            if (row >= 0)
                hot_idx_host_[tt * k_stride + static_cast<size_t>(hot++)] = row;
            else
                list[cold++] = list[j];
        }
        counts_host_[tt] = cold;
        hot_count_host_[tt] = hot;
        any_hot = any_hot || hot > 0;
        dv.upload(arena_, a.idx.offset + tt * a.idx.nb1, list,
                  sizeof(int32_t) * static_cast<size_t>(cold));
    }
    dv.upload(arena_, a.count.offset, counts_host_.data(),
              sizeof(int32_t) * static_cast<size_t>(n));
    if (any_hot) {
        host_to_device(a.xn, d.xn, a.xn.nb1 * static_cast<size_t>(n));
        dd.upload(device_arena_, d.hot_idx.offset, hot_idx_host_.data(),
                  sizeof(int32_t) * k_stride * static_cast<size_t>(n));
        dd.upload(device_arena_, d.hot_count.offset, hot_count_host_.data(),
                  sizeof(int32_t) * static_cast<size_t>(n));
        start_device_half(il, n);
    }
    try {
        dv.mul_mat_sparse2("sparse FFN up and gate (cold)", w.up, w.gate, xn, idx, count, u, g);
        dv.run("FFN activation", &pib_vtable::glu, &g, &u, static_cast<int32_t>(model_.glu()), &u);
        dv.run("sparse FFN down (cold)", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count, &x);
    } catch (...) {
        if (any_hot) wait_device_half();
        throw;
    }
    if (!any_hot) return;
    wait_device_half();
    const pib_tensor tmp = first_rows(a.tmp, n);
    device_to_host(d.partial, a.tmp, sizeof(float) * dim * static_cast<size_t>(n));
    dv.run("merging the device partial sum", &pib_vtable::add, &x, &tmp, &x);
}

} // namespace pi
