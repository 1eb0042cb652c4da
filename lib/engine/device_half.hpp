#pragma once
// The offload device's side of a context: its arena, where the residual stream currently is, the
// device's prediction of a layer's active neurons, the FFN of layers that run wholly on the
// device, and the hybrid FFN whose hot neurons run on the device (on a worker thread) while the
// CPU computes the cold ones (docs/hybrid.md). Every copy between the host and the device goes
// through here and is counted.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/arena.hpp"
#include "engine/device_worker.hpp"
#include "engine/link_tally.hpp"
#include "engine/offload.hpp"

namespace pi {

class device_half {
  public:
    // `host` and `host_tensors` are the context's CPU and its arena; all must outlive this.
    device_half(const model& m, const offload& off, device& host, const arena& host_tensors,
                int32_t n_batch);

    device& dev() const noexcept { return offload_.dev(); }
    const arena_tensors& tensors() const noexcept { return arena_.tensors(); }

    // The batch's positions, KV cells and, when the output is on the device, the rows whose
    // logits are wanted, in one upload (docs/hybrid.md, "What crosses per decoded token").
    void upload_batch(std::span<const int32_t> positions, std::span<const int32_t> cells,
                      std::span<const int32_t> out_rows);

    // The residual stream x lives on the host, on the device, or on both.
    void start_batch();
    bool x_on_device() const noexcept { return x_on_device_; }
    void x_to_host(int32_t n);
    void x_to_device(int32_t n);
    void x_changed_on_host() noexcept { x_on_device_ = false; }
    void x_changed_on_device() noexcept { x_on_host_ = false; }
    void host_to_device(const pib_tensor& host, const pib_tensor& dev, size_t bytes);
    void device_to_host(const pib_tensor& dev, const pib_tensor& host, size_t bytes);
    // Copies into and out of the device arena at a byte offset.
    void upload(size_t offset, const void* src, size_t bytes);
    void download(size_t offset, void* dst, size_t bytes);
    // What crossed since the last call.
    link_tally take_tally() noexcept { return std::exchange(tally_, link_tally{}); }

    // The predictor of layer il on the device, from x there (the layer's predictor is placed).
    // Its fc2 rows are hot first, so the scores split by position: the active hot neurons'
    // device rows stay on the device (hot_idx, their lengths in the layer's slot of
    // layer_counts), and only the cold lists come to the host arena as neuron ids, their
    // lengths in `cold_counts`. A layer wholly on the device sends nothing to the host.
    void predict(size_t il, int32_t n, std::span<int32_t> cold_counts);
    // A layer whose every neuron is on the device, over the lists predict() left there.
    void device_ffn(size_t il, int32_t n);
    // The host predicted into its arena: the active hot neurons become device rows (uploaded),
    // the cold ids stay in place and `counts` become their lengths. Returns whether any token
    // has a hot neuron.
    bool split_host_lists(size_t il, int32_t n, std::span<int32_t> counts);
    // A layer with hot and cold neurons whose predictor is on the device: predict(), then
    // hybrid_ffn(). With the device's transfer stream (pib_vtable version 5) the device starts
    // its hot half as soon as it has predicted, while x, the cold lists' lengths and the cold
    // lists come over beside it.
    void predicted_hybrid_ffn(size_t il, int32_t n, std::span<int32_t> cold_counts,
                              bool merge_on_device);
    // The sparse FFN split between the CPU and the device, with the cold lists in the host
    // arena and the hot ones on the device (from predict() when lists_on_device, else from
    // split_host_lists()). The device normalises x itself when it holds x and the layer's
    // ffn_norm, else the host's xn goes over. merge_on_device: the next block runs on the
    // device, so the CPU's result goes there and the device adds its partial sum; otherwise the
    // partial sum comes to the host. When no token has a cold neuron and the device can
    // normalise x, the layer runs on the device alone (as device_ffn).
    void hybrid_ffn(size_t il, int32_t n, bool lists_on_device, bool merge_on_device,
                    std::span<const int32_t> cold_counts);

    // The layer_counts slot of layer il for a batch of n tokens.
    pib_tensor layer_count(size_t il, int32_t n) const noexcept;
    // One download of every layer's slot for a batch of n tokens; then device_active(il) is the
    // sum of layer il's slot (valid for the layers predicted on the device in this batch).
    void fetch_layer_counts(int32_t n);
    uint64_t device_active(size_t il, int32_t n) const noexcept;

  private:
    // The predictor's kernels: scores, the hot lists (kept) and the cold lists (when the layer
    // has cold neurons) in the device arena.
    void submit_predictor(size_t il, int32_t n);
    // The cold lists of the tokens with `counts` into the host arena as neuron ids, and the
    // counts into its count tensor; with `transfers`, over the transfer stream.
    void fetch_cold_lists(size_t il, int32_t n, std::span<const int32_t> counts, bool transfers);
    // The FFN of layer il over its hot lists (hot_idx, `count` long) alone, from x on the device
    // into x there.
    void device_only_ffn(size_t il, int32_t n, const pib_tensor& count);
    // The CPU's cold half while the worker runs the hot half, the waits, then the merge.
    void cold_half_and_merge(size_t il, int32_t n, bool merge_on_device);
    void run_hot_neurons(size_t il, int32_t n);
    // Counted copies on the transfer stream, and the host's wait for them.
    void transfer_upload(size_t offset, const void* src, size_t bytes);
    void transfer_download(size_t offset, void* dst, size_t bytes);
    void transfer_wait();

    const model& model_;
    const offload& offload_;
    device& host_;
    const arena& host_arena_;
    arena arena_;
    bool x_on_host_ = true, x_on_device_ = false;
    bool transfers_ = false;         // the device has a transfer stream
    bool transfers_pending_ = false; // submitted and not yet waited for
    // Staging the device copies from: page-locked when the device can allocate it (then in
    // pinned_, else in fallback_): [n_batch][max_hot] device rows of active hot neurons,
    // [n_batch] their counts, [n_batch] the cold lists' lengths coming over, [3 * n_batch] the
    // batch's inputs (upload_batch).
    host_memory pinned_;
    std::vector<int32_t> fallback_;
    int32_t *hot_rows_ = nullptr, *hot_counts_ = nullptr, *cold_stage_ = nullptr;
    int32_t* batch_stage_ = nullptr;
    std::vector<int32_t> layer_counts_; // [n_layer * n_batch] what fetch_layer_counts brought
    // How the worker's job reads its inputs: the hot lists' lengths, and whether it normalises
    // x into xn on the device.
    pib_tensor hot_count_{};
    bool norm_on_device_ = false;
    device_worker worker_;
    link_tally tally_;
};

} // namespace pi
