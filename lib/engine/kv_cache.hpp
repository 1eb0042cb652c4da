#pragma once
// The KV cache of a context: per layer, the K and V rows of n_ctx cells, in host memory or, for
// layers whose attention runs on the offload device, in the device's memory (F16); and the
// position each cell holds, mirrored wherever attention reads it. One sequence: cell c holds
// position c or nothing.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/device.hpp"
#include "model/model.hpp"

namespace pi {

class offload;

class kv_cache {
  public:
    // Host cells are F16 or F32; the device keeps F16 cells for its attention layers when the
    // offload reserved room for n_ctx of them, else every layer's cache stays on the host.
    kv_cache(device& host, const offload* off, const hparams& h, int32_t n_ctx, bool f16);

    // Device bytes per layer of a cache of n_ctx F16 cells (the cells' positions included).
    static uint64_t device_layer_bytes(const hparams& h, int32_t n_ctx);

    struct layer_cells {
        pib_tensor k, v;
    };
    // Layer il's cells, where its attention reads them.
    const layer_cells& layer(size_t il) const noexcept { return layers_[il]; }
    bool on_device(size_t il) const noexcept { return on_device_[il]; }
    bool any_on_device() const noexcept { return device_ != nullptr; }
    // The position of each of the first span() cells (-1: empty), in host or device memory.
    pib_tensor host_positions() const noexcept { return spanned(host_positions_); }
    pib_tensor device_positions() const noexcept { return spanned(device_positions_); }
    int32_t n_ctx() const noexcept { return static_cast<int32_t>(cell_pos_.size()); }
    // Cells up to the last occupied one: what attention of the current batch spans.
    int32_t span() const noexcept { return span_; }
    // Bytes one decoded token reads from a layer's cache.
    uint64_t bytes_read_per_layer() const noexcept;

    // Claims the cells of a batch's positions (valid and distinct, checked by the caller).
    void occupy(std::span<const int32_t> positions);
    // Empties the cells of these positions, e.g. after a failed batch.
    void forget(std::span<const int32_t> positions);
    // Empties every cell holding a position >= pos.
    void truncate(int32_t pos);

  private:
    pib_tensor spanned(pib_tensor t) const noexcept {
        t.ne0 = span_;
        return t;
    }
    void publish_positions();

    device& host_;
    device* device_ = nullptr; // the offload device when it holds cells, else null
    ggml_type host_type_;
    int64_t row_elements_;
    std::vector<bool> on_device_;
    buffer host_memory_, device_memory_;
    std::vector<layer_cells> layers_;
    pib_tensor host_positions_{}, device_positions_{};
    std::vector<int32_t> cell_pos_;
    int32_t span_ = 0;
};

} // namespace pi
