#include "engine/kv_cache.hpp"

#include <algorithm>

#include "engine/arena.hpp"
#include "engine/offload.hpp"
#include "support/log.hpp"

namespace pi {

namespace {

constexpr size_t host_cache_alignment = 64;

// Whether the device keeps the cache of its attention layers: it must have reserved F16 cells
// for at least this context's n_ctx.
bool cache_on_device(const offload* off, int32_t n_ctx, bool f16) {
    bool any_device_attention = false;
    for (size_t il = 0; off && il < off->n_layers(); ++il)
        any_device_attention |= off->layer(il).has_attn();
    if (!any_device_attention || off->kv_n_ctx() <= 0) return false;
    if (n_ctx <= off->kv_n_ctx() && f16) return true;
    log(log_level::info,
        concat("the KV cache stays in host memory: the device reserved ", off->kv_n_ctx(),
               " F16 cells, the context asks for ", n_ctx, f16 ? " cells" : " F32 cells"));
    return false;
}

} // namespace

uint64_t kv_cache::device_layer_bytes(const hparams& h, int32_t n_ctx) {
    layout_builder lb(device_tensor_alignment);
    lb.add(ggml_type::f16, h.n_embd_kv(), n_ctx);
    lb.add(ggml_type::f16, h.n_embd_kv(), n_ctx);
    lb.add(ggml_type::i32, n_ctx, 1);
    return lb.size();
}

kv_cache::kv_cache(device& host, const offload* off, const hparams& h, int32_t n_ctx, bool f16)
    : host_(host), device_(cache_on_device(off, n_ctx, f16) ? &off->dev() : nullptr),
      host_type_(f16 ? ggml_type::f16 : ggml_type::f32), row_elements_(h.n_embd_kv()),
      on_device_(static_cast<size_t>(h.n_layer), false), layers_(static_cast<size_t>(h.n_layer)),
      cell_pos_(static_cast<size_t>(n_ctx), -1) {
    if (device_) {
        for (size_t il = 0; il < on_device_.size(); ++il)
            on_device_[il] = off->layer(il).has_attn();
    }

    layout_builder host_layout(host_cache_alignment), device_layout(device_tensor_alignment);
    for (size_t il = 0; il < layers_.size(); ++il) {
        layout_builder& lb = on_device_[il] ? device_layout : host_layout;
        const ggml_type type = on_device_[il] ? ggml_type::f16 : host_type_;
        layers_[il].k = lb.add(type, row_elements_, n_ctx);
        layers_[il].v = lb.add(type, row_elements_, n_ctx);
    }
    host_positions_ = host_layout.add(ggml_type::i32, n_ctx, 1);
    host_memory_ = host.alloc(host_layout.size());
    host_positions_.buffer = host_memory_.get();
    if (device_) {
        device_positions_ = device_layout.add(ggml_type::i32, n_ctx, 1);
        device_memory_ = device_->alloc(device_layout.size());
        device_positions_.buffer = device_memory_.get();
    }
    for (size_t il = 0; il < layers_.size(); ++il) {
        pib_buffer* memory = on_device_[il] ? device_memory_.get() : host_memory_.get();
        layers_[il].k.buffer = layers_[il].v.buffer = memory;
    }
    publish_positions();
}

uint64_t kv_cache::bytes_read_per_layer() const noexcept {
    return 2 * static_cast<uint64_t>(span_) * row_bytes(host_type_, row_elements_);
}

void kv_cache::occupy(std::span<const int32_t> positions) {
    for (int32_t p : positions)
        cell_pos_[static_cast<size_t>(p)] = p;
    publish_positions();
}

void kv_cache::forget(std::span<const int32_t> positions) {
    for (int32_t p : positions)
        cell_pos_[static_cast<size_t>(p)] = -1;
    publish_positions();
}

void kv_cache::truncate(int32_t pos) {
    for (int32_t& p : cell_pos_)
        if (p >= pos) p = -1;
    publish_positions();
}

void kv_cache::publish_positions() {
    span_ = 0;
    for (auto c = static_cast<int32_t>(cell_pos_.size()) - 1; c >= 0 && span_ == 0; --c)
        if (cell_pos_[static_cast<size_t>(c)] >= 0) span_ = c + 1;
    const size_t bytes = cell_pos_.size() * sizeof(int32_t);
    host_.upload(host_memory_, host_positions_.offset, cell_pos_.data(), bytes);
    if (device_) device_->upload(device_memory_, device_positions_.offset, cell_pos_.data(), bytes);
}

} // namespace pi
