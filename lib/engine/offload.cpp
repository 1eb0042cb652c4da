#include "engine/offload.hpp"

#include <algorithm>
#include <cstring>

#include "support/error.hpp"

namespace pi {

namespace {

// The bytes of one row of a host weight tensor (the model's weights are host-visible).
const uint8_t* host_row(const device& host, const pib_tensor& t, int64_t row) {
    const auto* base = static_cast<const uint8_t*>(host.vt().buffer_host_ptr(host.ctx(), t.buffer));
    if (!base) fail(status::internal, "model weights are not host-visible");
    return base + t.offset + static_cast<size_t>(row) * t.nb1;
}

} // namespace

offload::offload(const model& m, std::unique_ptr<device> dev, const std::vector<std::vector<int32_t>>& hot)
    : dev_(std::move(dev)) {
    const hparams& h = m.hp();
    if (!m.sparse_inference()) fail(status::invalid_argument, "FFN offloading needs sparse inference");
    if (hot.size() != static_cast<size_t>(h.n_layer))
        fail(status::invalid_argument, "hot neuron sets for ", hot.size(), " layers, the model has ", h.n_layer);
    layers_.resize(hot.size());
    for (size_t il = 0; il < hot.size(); ++il) {
        offload_layer& l = layers_[il];
        l.hot = hot[il];
        if (!std::is_sorted(l.hot.begin(), l.hot.end()) ||
            std::adjacent_find(l.hot.begin(), l.hot.end()) != l.hot.end())
            fail(status::invalid_argument, "hot neurons of layer ", il, " are not strictly ascending");
        l.device_row.assign(static_cast<size_t>(h.n_ff), -1);
        for (size_t k = 0; k < l.hot.size(); ++k) {
            const int32_t id = l.hot[k];
            if (id < 0 || id >= h.n_ff) fail(status::invalid_argument, "hot neuron ", id, " of layer ", il, " is out of range");
            l.device_row[static_cast<size_t>(id)] = static_cast<int32_t>(k);
        }
        const auto k = static_cast<int64_t>(l.hot.size());
        max_hot_ = std::max(max_hot_, static_cast<int32_t>(k));
        if (k == 0) continue;

        // The packed rows, as the planner counts them; the host splits each token's active list
        // into device rows, so the device needs no bucket of neuron ids.
        const layer_weights& w = m.layers()[il];
        const size_t up_bytes = w.up.nb1 * static_cast<size_t>(k);
        const size_t gate_bytes = w.gate.nb1 * static_cast<size_t>(k);
        const size_t down_bytes = w.down_t.nb1 * static_cast<size_t>(k);
        l.weights = dev_->alloc(up_bytes + gate_bytes + down_bytes);
        bytes_ += up_bytes + gate_bytes + down_bytes;
        const auto ty = [](const pib_tensor& t) { return static_cast<ggml_type>(t.type); };
        l.up = view(l.weights, 0, ty(w.up), w.up.ne0, k);
        l.gate = view(l.weights, up_bytes, ty(w.gate), w.gate.ne0, k);
        l.down_t = view(l.weights, up_bytes + gate_bytes, ty(w.down_t), w.down_t.ne0, k);

        const device& host = m.host_device();
        std::vector<uint8_t> staging;
        for (const auto& [src, dst] : {std::pair{&w.up, &l.up}, std::pair{&w.gate, &l.gate}, std::pair{&w.down_t, &l.down_t}}) {
            staging.resize(src->nb1 * static_cast<size_t>(k));
            for (int64_t r = 0; r < k; ++r)
                std::memcpy(staging.data() + static_cast<size_t>(r) * src->nb1, host_row(host, *src, l.hot[static_cast<size_t>(r)]),
                            src->nb1);
            dev_->upload(l.weights, dst->offset, staging.data(), staging.size());
        }
    }
}

offload::~offload() = default;

} // namespace pi
