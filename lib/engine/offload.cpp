#include "engine/offload.hpp"

#include <algorithm>

#include "planner/planner.hpp"
#include "support/error.hpp"

namespace pi {

namespace {

size_t align_up(size_t n) {
    return (n + device_tensor_alignment - 1) / device_tensor_alignment * device_tensor_alignment;
}

size_t tensor_bytes(const pib_tensor& t) {
    return t.nb1 * static_cast<size_t>(t.ne1);
}

// The bytes of a host weight tensor (the model's weights are host-visible).
const uint8_t* host_bytes(const device& host, const pib_tensor& t) {
    const auto* base = static_cast<const uint8_t*>(host.vt().buffer_host_ptr(host.ctx(), t.buffer));
    if (!base) fail(status::internal, "model weights are not host-visible");
    return base + t.offset;
}

ggml_type type_of(const pib_tensor& t) {
    return static_cast<ggml_type>(t.type);
}

bool at(const std::vector<bool>& v, size_t i) {
    return i < v.size() && v[i];
}

// The rows `order` of a host tensor, one after the other.
std::vector<uint8_t> gather_rows(const device& host, const pib_tensor& t,
                                 std::initializer_list<const std::vector<int32_t>*> order) {
    std::vector<uint8_t> out;
    const uint8_t* rows = host_bytes(host, t);
    for (const std::vector<int32_t>* ids : order)
        for (int32_t r : *ids) {
            const uint8_t* row = rows + static_cast<size_t>(r) * t.nb1;
            out.insert(out.end(), row, row + t.nb1);
        }
    return out;
}

} // namespace

offload_placement placement_of(const planner::plan& p, int32_t kv_n_ctx) {
    offload_placement out;
    out.hot = p.hot;
    out.attn = p.attn_on_device;
    out.predictor = p.predictor_on_device;
    out.ffn_norm = p.ffn_norm_on_device;
    out.output = p.output_on_device;
    out.kv_n_ctx = p.kv_on_device ? kv_n_ctx : 0;
    return out;
}

uint64_t packed_bytes(std::initializer_list<const pib_tensor*> tensors) {
    uint64_t total = 0;
    for (const pib_tensor* t : tensors)
        total += align_up(tensor_bytes(*t));
    return total;
}

buffer
offload::upload_group(std::initializer_list<std::pair<const pib_tensor*, pib_tensor*>> tensors) {
    size_t total = 0;
    for (const auto& [src, dst] : tensors)
        total += align_up(tensor_bytes(*src));
    buffer mem = dev_->alloc(total);
    bytes_ += total;
    size_t offset = 0;
    for (const auto& [src, dst] : tensors) {
        *dst = *src;
        dst->buffer = mem.get();
        dst->offset = offset;
        dev_->upload(mem, offset, host_bytes(model_.host_device(), *src), tensor_bytes(*src));
        offset += align_up(tensor_bytes(*src));
    }
    return mem;
}

offload::offload(const model& m, std::unique_ptr<device> dev, const offload_placement& placement)
    : model_(m), dev_(std::move(dev)) {
    const hparams& h = m.hp();
    if (!m.sparse_inference()) fail(status::invalid_argument, "offloading needs sparse inference");
    if (!offload_capable(*m.hp().arch))
        fail(status::unsupported, "offloading ", m.hp().arch->name,
             " layers to a device is not supported yet; run this model on the CPU");
    const auto n_layer = static_cast<size_t>(h.n_layer);
    if (placement.hot.size() != n_layer)
        fail(status::invalid_argument, "hot neuron sets for ", placement.hot.size(),
             " layers, the model has ", h.n_layer);
    for (const auto* flags : {&placement.attn, &placement.predictor, &placement.ffn_norm})
        if (!flags->empty() && flags->size() != n_layer)
            fail(status::invalid_argument, "a dense placement covers ", flags->size(),
                 " layers, the model has ", h.n_layer);
    if (placement.kv_n_ctx < 0)
        fail(status::invalid_argument, "kv_n_ctx ", placement.kv_n_ctx, " is negative");
    kv_n_ctx_ = placement.kv_n_ctx;
    layers_.resize(n_layer);
    for (size_t il = 0; il < n_layer; ++il) {
        offload_layer& l = layers_[il];
        const layer_weights& w = m.layers()[il];
        if (at(placement.attn, il))
            l.attn_mem = upload_group({{&w.attn_norm, &l.dense.attn_norm},
                                       {&w.wq, &l.dense.wq},
                                       {&w.wk, &l.dense.wk},
                                       {&w.wv, &l.dense.wv},
                                       {&w.wo, &l.dense.wo}});
        if (at(placement.ffn_norm, il))
            l.ffn_norm_mem = upload_group({{&w.ffn_norm, &l.dense.ffn_norm}});

        l.hot = placement.hot[il];
        if (!std::is_sorted(l.hot.begin(), l.hot.end()) ||
            std::adjacent_find(l.hot.begin(), l.hot.end()) != l.hot.end())
            fail(status::invalid_argument, "hot neurons of layer ", il,
                 " are not strictly ascending");
        l.device_row.assign(static_cast<size_t>(h.n_ff), -1);
        for (size_t k = 0; k < l.hot.size(); ++k) {
            const int32_t id = l.hot[k];
            if (id < 0 || id >= h.n_ff)
                fail(status::invalid_argument, "hot neuron ", id, " of layer ", il,
                     " is out of range");
            l.device_row[static_cast<size_t>(id)] = static_cast<int32_t>(k);
        }
        for (int32_t id = 0; id < h.n_ff; ++id)
            if (l.device_row[static_cast<size_t>(id)] < 0) l.cold.push_back(id);
        if (at(placement.predictor, il)) {
            l.predictor_mem = upload_group({{&w.fc1, &l.dense.fc1}, {&w.fc2, &l.dense.fc2}});
            l.dense.predictor_rank = w.predictor_rank;
            if (!l.hot.empty() && !l.cold.empty()) // else hot first is the file's order
                dev_->upload(l.predictor_mem, l.dense.fc2.offset,
                             gather_rows(m.host_device(), w.fc2, {&l.hot, &l.cold}).data(),
                             tensor_bytes(w.fc2));
        }
        const auto k = static_cast<int64_t>(l.hot.size());
        max_hot_ = std::max(max_hot_, static_cast<int32_t>(k));
        if (k == 0) continue;

        // The packed rows, as the planner counts them; the host splits each token's active list
        // into device rows, so the device needs no bucket of neuron ids.
        const size_t up_bytes = w.up.nb1 * static_cast<size_t>(k);
        const size_t gate_bytes = w.gate.nb1 * static_cast<size_t>(k);
        const size_t down_bytes = w.down_t.nb1 * static_cast<size_t>(k);
        l.weights = dev_->alloc(up_bytes + gate_bytes + down_bytes);
        bytes_ += up_bytes + gate_bytes + down_bytes;
        l.up = view(l.weights, 0, type_of(w.up), w.up.ne0, k);
        l.gate = view(l.weights, up_bytes, type_of(w.gate), w.gate.ne0, k);
        l.down_t = view(l.weights, up_bytes + gate_bytes, type_of(w.down_t), w.down_t.ne0, k);

        for (const auto& [src, dst] : {std::pair{&w.up, &l.up}, std::pair{&w.gate, &l.gate},
                                       std::pair{&w.down_t, &l.down_t}}) {
            const std::vector<uint8_t> rows = gather_rows(m.host_device(), *src, {&l.hot});
            dev_->upload(l.weights, dst->offset, rows.data(), rows.size());
        }
    }
    if (placement.output)
        output_mem_ = upload_group({{&m.output_norm(), &output_norm_}, {&m.output(), &output_}});
}

offload::~offload() = default;

bool offload::any_dense() const noexcept {
    return has_output() || std::any_of(layers_.begin(), layers_.end(), [](const offload_layer& l) {
               return l.has_attn() || l.has_predictor() || l.has_ffn_norm();
           });
}

} // namespace pi
