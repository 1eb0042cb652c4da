#include "engine/device_half.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "engine/block_ops.hpp"
#include "engine/row_prefix_copies.hpp"

namespace pi {

device_half::device_half(const model& m, const offload& off, device& host,
                         const arena& host_tensors, int32_t n_batch)
    : model_(m), offload_(off), host_(host), host_arena_(host_tensors),
      arena_(off.dev(), m, device_arena_spec(n_batch, off.max_hot())),
      transfers_(off.dev().has_transfers()),
      layer_counts_(static_cast<size_t>(n_batch) * static_cast<size_t>(m.hp().n_layer)),
      worker_([this](size_t il, int32_t n) { run_hot_neurons(il, n); }) {
    const auto batch = static_cast<size_t>(n_batch);
    const size_t rows = batch * static_cast<size_t>(tensors().hot_idx.ne0);
    const size_t ints = rows + 5 * batch;
    int32_t* stage = nullptr;
    if (off.dev().has_host_alloc()) {
        pinned_ = off.dev().host_alloc(sizeof(int32_t) * ints);
        stage = static_cast<int32_t*>(pinned_.get());
    } else {
        fallback_.resize(ints);
        stage = fallback_.data();
    }
    if (tensors().idx.nb1 != host_tensors.tensors().idx.nb1) // fetch_cold_lists relies on it
        fail(status::internal, "the host and device arenas' neuron lists differ in layout");
    hot_rows_ = stage;
    hot_counts_ = stage + rows;
    cold_stage_ = stage + rows + batch;
    batch_stage_ = stage + rows + 2 * batch;
}

void device_half::transfer_upload(size_t offset, const void* src, size_t bytes) {
    offload_.dev().run("uploading on the transfer stream", &pib_vtable::transfer_upload,
                       arena_.memory().get(), offset, src, bytes);
    tally_.count_upload(bytes);
    transfers_pending_ = true;
}

void device_half::transfer_download(size_t offset, void* dst, size_t bytes) {
    offload_.dev().run("downloading on the transfer stream", &pib_vtable::transfer_download,
                       static_cast<const pib_buffer*>(arena_.memory().get()), offset, dst, bytes);
    tally_.count_download(bytes);
    transfers_pending_ = true;
}

void device_half::transfer_wait() {
    if (!transfers_pending_) return;
    offload_.dev().run("waiting for the transfer stream", &pib_vtable::transfer_wait);
    transfers_pending_ = false;
}

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

void device_half::start_batch() {
    transfer_wait(); // an upload of the last batch may still read the host arena
    x_on_host_ = true;
    x_on_device_ = false;
}

void device_half::x_to_host(int32_t n) {
    if (x_on_host_) return;
    transfer_wait(); // the host arena's x may still be going to the device
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

void device_half::upload_batch(std::span<const int32_t> positions, std::span<const int32_t> cells,
                               std::span<const int32_t> out_rows) {
    // Each upload is a copy and, on a GPU, a wait for the stream: the three small inputs go as
    // one. The output rows travel only when the device computes the logits.
    const size_t n = positions.size();
    int32_t* at = std::copy(positions.begin(), positions.end(), batch_stage_);
    at = std::copy(cells.begin(), cells.end(), at);
    if (offload_.has_output()) at = std::copy(out_rows.begin(), out_rows.end(), at);
    const size_t offset = arena_.pack_batch_inputs(static_cast<int64_t>(n));
    upload(offset, batch_stage_, sizeof(int32_t) * static_cast<size_t>(at - batch_stage_));
}

pib_tensor device_half::layer_count(size_t il, int32_t n) const noexcept {
    const pib_tensor& all = tensors().layer_counts;
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(n);
    return pib_tensor{all.type, n, 1, bytes, all.buffer, all.offset + il * bytes};
}

void device_half::fetch_layer_counts(int32_t n) {
    offload_.dev().run("synchronize", &pib_vtable::synchronize);
    download(tensors().layer_counts.offset, layer_counts_.data(),
             sizeof(int32_t) * static_cast<size_t>(n) * offload_.n_layers());
}

uint64_t device_half::device_active(size_t il, int32_t n) const noexcept {
    const auto first =
        layer_counts_.begin() + static_cast<std::ptrdiff_t>(il * static_cast<size_t>(n));
    return std::accumulate(first, first + n, uint64_t{0});
}

void device_half::submit_predictor(size_t il, int32_t n) {
    const offload_layer& l = offload_.layer(il);
    const layer_weights& w = l.dense;
    device& dev = offload_.dev();
    const arena_tensors& d = tensors();
    const int64_t ff = model_.hp().n_ff, k = l.n_hot();
    const float threshold = model_.sparse_threshold();
    const pib_tensor x = first_rows(d.x, n), p = first_rows(d.p, n);
    const pib_tensor hidden{static_cast<uint32_t>(ggml_type::f32),
                            w.predictor_rank,
                            n,
                            row_bytes(ggml_type::f32, w.predictor_rank),
                            d.mem,
                            d.predictor_hidden_offset};
    // The predictor reads the residual before ffn_norm (docs/file-format.md).
    dev.run("predictor fc1", &pib_vtable::mul_mat, &w.fc1, &x, &hidden);
    dev.run("predictor ReLU", &pib_vtable::relu, &hidden, &hidden);
    dev.run("predictor fc2", &pib_vtable::mul_mat, &w.fc2, &hidden, &p);
    if (k > 0) {
        pib_tensor hot_scores = p, idx = first_rows(d.hot_idx, n);
        hot_scores.ne0 = idx.ne0 = k;
        const pib_tensor count = layer_count(il, n);
        dev.run("selecting active hot neurons", &pib_vtable::select_active, &hot_scores, threshold,
                &idx, &count);
    }
    if (k == ff) return;
    pib_tensor cold_scores = p;
    cold_scores.offset += sizeof(float) * static_cast<size_t>(k);
    cold_scores.ne0 = ff - k;
    const pib_tensor idx = first_rows(d.idx, n);
    pib_tensor count = d.count;
    count.ne0 = n;
    dev.run("selecting active cold neurons", &pib_vtable::select_active, &cold_scores, threshold,
            &idx, &count);
}

void device_half::predict(size_t il, int32_t n, std::span<int32_t> cold_counts) {
    submit_predictor(il, n);
    if (offload_.layer(il).all_hot(model_.hp().n_ff)) {
        std::fill(cold_counts.begin(), cold_counts.end(), 0);
        return;
    }
    offload_.dev().run("synchronize", &pib_vtable::synchronize);
    download(tensors().count.offset, cold_counts.data(), sizeof(int32_t) * static_cast<size_t>(n));
    fetch_cold_lists(il, n, cold_counts, false);
}

void device_half::fetch_cold_lists(size_t il, int32_t n, std::span<const int32_t> counts,
                                   bool transfers) {
    const offload_layer& l = offload_.layer(il);
    const arena_tensors& h = host_arena_.tensors();
    const arena_tensors& d = tensors();
    const auto list_of = [&](size_t t) {
        return reinterpret_cast<int32_t*>(host_arena_.host_data() + h.idx.offset + t * h.idx.nb1);
    };
    // The two arenas' lists have one layout, so a run of the device's rows lands on the host's
    // rows of the same tokens; the unused tails it carries along are scratch on both.
    uint8_t* const lists = host_arena_.host_data() + h.idx.offset;
    for_each_row_prefix_copy(counts.first(static_cast<size_t>(n)), sizeof(int32_t), d.idx.nb1,
                             row_prefix_max_gap, [&](size_t at, size_t bytes) {
                                 if (transfers)
                                     transfer_download(d.idx.offset + at, lists + at, bytes);
                                 else
                                     download(d.idx.offset + at, lists + at, bytes);
                             });
    if (transfers) transfer_wait();
    // The lists came over in the device's numbering (position among the cold neurons); with
    // no hot neuron that is the neuron id.
    if (!l.hot.empty())
        for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
            int32_t* list = list_of(t);
            for (int32_t j = 0; j < counts[t]; ++j)
                list[j] = l.cold[static_cast<size_t>(list[j])];
        }
    host_.upload(host_arena_.memory(), h.count.offset, counts.data(),
                 sizeof(int32_t) * static_cast<size_t>(n));
}

// Device row i is neuron i, so the predictor's hot lists index the gathered rows directly and
// nothing crosses to the host.
void device_half::device_ffn(size_t il, int32_t n) {
    device_only_ffn(il, n, layer_count(il, n));
}

void device_half::device_only_ffn(size_t il, int32_t n, const pib_tensor& count) {
    const offload_layer& l = offload_.layer(il);
    device& dev = offload_.dev();
    const arena_tensors& d = tensors();
    const pib_tensor x = first_rows(d.x, n), xn = first_rows(d.xn, n);
    pib_tensor idx = first_rows(d.hot_idx, n), up = first_rows(d.hot_up, n),
               gate = first_rows(d.hot_gate, n);
    idx.ne0 = up.ne0 = gate.ne0 = l.n_hot();
    ffn_input(dev, model_.hp(), l.dense, x, xn);
    dev.mul_mat_sparse2("device FFN up and gate", l.up, l.gate, xn, idx, count, up, gate);
    dev.run("device FFN activation", &pib_vtable::glu, &gate, &up,
            static_cast<int32_t>(model_.glu()), &up);
    dev.run("device FFN down", &pib_vtable::axpy_sparse, &l.down_t, &up, &idx, &count, &x);
    x_on_host_ = false;
}

bool device_half::split_host_lists(size_t il, int32_t n, std::span<int32_t> counts) {
    const arena_tensors& h = host_arena_.tensors();
    const arena_tensors& d = tensors();
    const offload_layer& l = offload_.layer(il);
    const size_t k_stride = static_cast<size_t>(d.hot_idx.ne0);
    bool any_hot = false;
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const int32_t total = counts[tt];
        auto* list =
            reinterpret_cast<int32_t*>(host_arena_.host_data() + h.idx.offset + tt * h.idx.nb1);
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
    }
    host_.upload(host_arena_.memory(), h.count.offset, counts.data(),
                 sizeof(int32_t) * static_cast<size_t>(n));
    if (!any_hot) return false;
    // A decoded token sends its list alone; a batch sends the rows up to its last token's.
    const size_t used = k_stride * static_cast<size_t>(n - 1) +
                        static_cast<size_t>(hot_counts_[static_cast<size_t>(n - 1)]);
    const size_t count_bytes = sizeof(int32_t) * static_cast<size_t>(n);
    if (transfers_) { // the staging stays untouched until the worker's job has ended
        transfer_upload(d.hot_idx.offset, hot_rows_, sizeof(int32_t) * used);
        transfer_upload(d.hot_count.offset, hot_counts_, count_bytes);
        offload_.dev().run("ordering kernels after transfers",
                           &pib_vtable::kernels_after_transfers);
    } else {
        upload(d.hot_idx.offset, hot_rows_, sizeof(int32_t) * used);
        upload(d.hot_count.offset, hot_counts_, count_bytes);
    }
    return true;
}

// The device's share of a hybrid FFN, on the worker thread: the active hot neurons of every
// token, summed into its own partial output.
void device_half::run_hot_neurons(size_t il, int32_t n) {
    const offload_layer& l = offload_.layer(il);
    device& dev = offload_.dev();
    const arena_tensors& d = tensors();
    pib_tensor idx = first_rows(d.hot_idx, n), up = first_rows(d.hot_up, n),
               gate = first_rows(d.hot_gate, n);
    idx.ne0 = up.ne0 = gate.ne0 = l.n_hot(); // rows keep the arena's stride (the largest layer)
    const pib_tensor xn = first_rows(d.xn, n), partial = first_rows(d.partial, n);
    if (norm_on_device_) ffn_input(dev, model_.hp(), l.dense, first_rows(d.x, n), xn);
    dev.mul_mat_sparse2("device FFN up and gate", l.up, l.gate, xn, idx, hot_count_, up, gate);
    dev.run("device FFN activation", &pib_vtable::glu, &gate, &up,
            static_cast<int32_t>(model_.glu()), &up);
    dev.run("clearing the device partial sum", &pib_vtable::buffer_clear, d.mem, partial.offset,
            partial.nb1 * static_cast<size_t>(n));
    dev.run("device FFN down", &pib_vtable::axpy_sparse, &l.down_t, &up, &idx, &hot_count_,
            &partial);
    dev.run("device synchronize", &pib_vtable::synchronize);
}

// Both halves run at once, the device's on the worker thread; then the partial sums meet where
// the next block runs.
void device_half::hybrid_ffn(size_t il, int32_t n, bool lists_on_device, bool merge_on_device,
                             std::span<const int32_t> cold_counts) {
    const arena_tensors& h = host_arena_.tensors();
    const arena_tensors& d = tensors();
    const offload_layer& l = offload_.layer(il);
    norm_on_device_ = x_on_device_ && l.has_ffn_norm();
    if (lists_on_device) {
        hot_count_ = layer_count(il, n);
    } else {
        hot_count_ = d.hot_count;
        hot_count_.ne0 = n;
    }
    if (norm_on_device_ &&
        std::all_of(cold_counts.begin(), cold_counts.end(), [](int32_t c) { return c == 0; })) {
        device_only_ffn(il, n, hot_count_); // nothing for the CPU to add
        return;
    }
    x_to_host(n); // the CPU's half adds into x
    if (!norm_on_device_) {
        const pib_tensor x = first_rows(h.x, n), xn = first_rows(h.xn, n);
        ffn_input(host_, model_.hp(), model_.layers()[il], x, xn);
        const size_t bytes = h.xn.nb1 * static_cast<size_t>(n);
        if (transfers_) {
            transfer_upload(d.xn.offset, host_arena_.host_data() + h.xn.offset, bytes);
            offload_.dev().run("ordering kernels after transfers",
                               &pib_vtable::kernels_after_transfers);
        } else {
            host_to_device(h.xn, d.xn, bytes);
        }
    }
    worker_.start(il, n);
    cold_half_and_merge(il, n, merge_on_device);
}

void device_half::predicted_hybrid_ffn(size_t il, int32_t n, std::span<int32_t> cold_counts,
                                       bool merge_on_device) {
    const offload_layer& l = offload_.layer(il);
    if (!transfers_ || !l.has_ffn_norm()) {
        predict(il, n, cold_counts);
        hybrid_ffn(il, n, true, merge_on_device, cold_counts);
        return;
    }
    // Stream order: x (the attention's result) and, after the predictor, the cold lists'
    // lengths go on the transfer stream; the hot half follows the predictor on the kernels'
    // stream and runs while they and then the cold lists come over.
    device& dev = offload_.dev();
    const arena_tensors& h = host_arena_.tensors();
    const arena_tensors& d = tensors();
    const auto rows = static_cast<size_t>(n);
    norm_on_device_ = true; // x is on the device: the predictor read it there
    hot_count_ = layer_count(il, n);
    const bool x_needed = !x_on_host_;
    if (x_needed) {
        dev.run("ordering transfers after kernels", &pib_vtable::transfer_after_kernels);
        transfer_download(d.x.offset, host_arena_.host_data() + h.x.offset, h.x.nb1 * rows);
    }
    submit_predictor(il, n);
    dev.run("ordering transfers after kernels", &pib_vtable::transfer_after_kernels);
    transfer_download(d.count.offset, cold_stage_, sizeof(int32_t) * rows);
    worker_.start(il, n);
    try {
        transfer_wait();
        std::copy(cold_stage_, cold_stage_ + rows, cold_counts.begin());
        fetch_cold_lists(il, n, cold_counts, true);
    } catch (...) {
        worker_.wait();
        throw;
    }
    x_on_host_ = true;
    cold_half_and_merge(il, n, merge_on_device);
}

void device_half::cold_half_and_merge(size_t il, int32_t n, bool merge_on_device) {
    using clock = std::chrono::steady_clock;
    const arena_tensors& h = host_arena_.tensors();
    const arena_tensors& d = tensors();
    const layer_weights& w = model_.layers()[il];
    device& dev = offload_.dev();
    const auto rows = static_cast<size_t>(n);
    const pib_tensor x = first_rows(h.x, n), xn = first_rows(h.xn, n), u = first_rows(h.u, n),
                     g = first_rows(h.g, n), idx = first_rows(h.idx, n);
    pib_tensor count = h.count;
    count.ne0 = n;
    try {
        if (norm_on_device_) ffn_input(host_, model_.hp(), w, x, xn);
        host_.mul_mat_sparse2("sparse FFN up and gate (cold)", w.up, w.gate, xn, idx, count, u, g);
        host_.run("FFN activation", &pib_vtable::glu, &g, &u, static_cast<int32_t>(model_.glu()),
                  &u);
        host_.run("sparse FFN down (cold)", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count,
                  &x);
    } catch (...) {
        worker_.wait();
        throw;
    }
    const clock::time_point host_done = clock::now();
    worker_.wait();
    tally_.cpu_wait_seconds += std::chrono::duration<double>(clock::now() - host_done).count();
    if (worker_.finished() < host_done)
        tally_.device_wait_seconds +=
            std::chrono::duration<double>(host_done - worker_.finished()).count();

    if (merge_on_device) {
        const pib_tensor dx = first_rows(d.x, n), cpu_sum = first_rows(d.tmp, n),
                         partial = first_rows(d.partial, n);
        if (transfers_) { // x stays untouched on the host until the transfer stream is waited for
            transfer_upload(d.tmp.offset, host_arena_.host_data() + h.x.offset, h.x.nb1 * rows);
            dev.run("ordering kernels after transfers", &pib_vtable::kernels_after_transfers);
        } else {
            host_to_device(h.x, d.tmp, h.x.nb1 * rows);
        }
        dev.run("merging the CPU's partial sum", &pib_vtable::add, &cpu_sum, &partial, &dx);
        x_on_device_ = true;
        x_on_host_ = false;
    } else {
        const pib_tensor tmp = first_rows(h.tmp, n);
        device_to_host(d.partial, h.tmp, d.partial.nb1 * rows);
        host_.run("merging the device partial sum", &pib_vtable::add, &x, &tmp, &x);
        x_on_host_ = true;
        x_on_device_ = false;
    }
}

} // namespace pi
