#pragma once
// The hot FFN neurons of every layer, gathered into a device's memory (spec §4.2): device row k
// of a layer holds host row hot[k] of ffn_up, ffn_gate and ffn_down_t. Shared by every context
// of a model; the cold neurons stay in the mmapped file and run on the CPU.
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/device.hpp"
#include "model/model.hpp"

namespace pi {

struct offload_layer {
    std::vector<int32_t> hot;            // ascending neuron ids on the device
    std::vector<int32_t> device_row;     // per neuron: its device row, or -1 when cold
    buffer weights;                      // the gathered rows of up, gate and down_t
    pib_tensor up{}, gate{}, down_t{};   // [n_embd][hot.size()] views into `weights`
};

class offload {
public:
    // Uploads the hot rows; throws pi::error(out_of_memory) when the device cannot hold them.
    offload(const model& m, std::unique_ptr<device> dev, const std::vector<std::vector<int32_t>>& hot);
    ~offload();

    device& dev() const noexcept { return *dev_; }
    const offload_layer& layer(size_t il) const noexcept { return layers_[il]; }
    size_t n_layers() const noexcept { return layers_.size(); }
    int32_t max_hot() const noexcept { return max_hot_; }
    uint64_t bytes_allocated() const noexcept { return bytes_; }

private:
    std::unique_ptr<device> dev_;
    std::vector<offload_layer> layers_;
    int32_t max_hot_ = 0;
    uint64_t bytes_ = 0;
};

} // namespace pi
