#pragma once
// The offload device's side of a context: its arena, where the residual stream currently is, the
// FFN of layers that run wholly on the device, and the hybrid FFN whose hot neurons run on the
// device (on a worker thread) while the CPU computes the cold ones (docs/forward-pass.md).
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

    // The batch's positions and KV cells.
    void upload_batch(std::span<const int32_t> positions, std::span<const int32_t> cells);

    // The residual stream x lives on the host, on the device, or on both.
    void start_batch() noexcept {
        x_on_host_ = true;
        x_on_device_ = false;
    }
    void x_to_host(int32_t n);
    void x_to_device(int32_t n);
    void x_changed_on_host() noexcept { x_on_device_ = false; }
    void x_changed_on_device() noexcept { x_on_host_ = false; }
    void host_to_device(const pib_tensor& host, const pib_tensor& dev, size_t bytes);
    void device_to_host(const pib_tensor& dev, const pib_tensor& host, size_t bytes);
    // Copies into and out of the device arena at a byte offset; every copy between the host and
    // the device goes through these and is counted.
    void upload(size_t offset, const void* src, size_t bytes);
    void download(size_t offset, void* dst, size_t bytes);
    // What crossed since the last call.
    link_tally take_tally() noexcept { return std::exchange(tally_, link_tally{}); }

    // The device predicted; the CPU computes the layer's FFN and needs the lists.
    void lists_to_host(int32_t n, std::span<const int32_t> counts);
    // A layer whose every neuron is on the device, predicted there.
    void device_ffn(size_t il, int32_t n);
    // The sparse FFN split between the CPU and the device, with xn = ffn_norm(x) on the host and
    // the predictor's lists in the host arena (or the device's when it predicted); `counts` are
    // the lists' lengths and end as the cold lists' lengths.
    void hybrid_ffn(size_t il, int32_t n, bool lists_on_device, std::span<int32_t> counts);

  private:
    void run_hot_neurons(size_t il, int32_t n);

    const model& model_;
    const offload& offload_;
    device& host_;
    const arena& host_arena_;
    arena arena_;
    bool x_on_host_ = true, x_on_device_ = false;
    std::vector<int32_t> lists_;      // [n_batch][n_ff] active lists, split in place to cold
    std::vector<int32_t> hot_rows_;   // [n_batch][max_hot] device rows of active hot neurons
    std::vector<int32_t> hot_counts_; // [n_batch]
    device_worker worker_;
    link_tally tally_;
};

} // namespace pi
