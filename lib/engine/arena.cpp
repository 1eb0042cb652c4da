#include "engine/arena.hpp"

#include <algorithm>

namespace pi {

namespace {

constexpr size_t host_arena_alignment = 64;

size_t aligned(size_t bytes, size_t alignment) {
    return (bytes + alignment - 1) / alignment * alignment;
}

} // namespace

pib_tensor layout_builder::add(ggml_type type, int64_t cols, int64_t rows) {
    const pib_tensor t{static_cast<uint32_t>(type), cols,    rows,
                       row_bytes(type, cols),       nullptr, size_};
    size_ += aligned(t.nb1 * static_cast<size_t>(rows), alignment_);
    return t;
}

size_t layout_builder::reserve(size_t bytes) {
    const size_t offset = size_;
    size_ += aligned(bytes, alignment_);
    return offset;
}

arena_tensors layout_arena(const model& m, const arena_spec& spec) {
    const hparams& h = m.hp();
    const int64_t B = spec.n_batch, d = h.n_embd, kv = h.n_embd_kv(), ff = h.n_ff;
    arena_tensors a;
    layout_builder lb(host_arena_alignment);
    if (spec.host) a.ids = lb.add(ggml_type::i32, B, 1);
    if (spec.host && h.arch->learned_positions) a.position_rows = lb.add(ggml_type::i32, B, 1);
    if (spec.host) {
        a.pos = lb.add(ggml_type::i32, B, 1);
        a.cells = lb.add(ggml_type::i32, B, 1);
        a.out_rows = lb.add(ggml_type::i32, B, 1);
    } else {
        // One region for the batch's inputs, so that one copy brings them (pack_batch_inputs).
        a.pos = a.cells = a.out_rows = lb.add(ggml_type::i32, 3 * B, 1);
        a.pos.ne0 = a.cells.ne0 = a.out_rows.ne0 = B;
        a.pos.nb1 = a.cells.nb1 = a.out_rows.nb1 = row_bytes(ggml_type::i32, B);
        a.batch_inputs_offset = a.pos.offset;
    }
    a.count = lb.add(ggml_type::i32, B, 1);
    a.x = lb.add(ggml_type::f32, d, B);
    a.xn = lb.add(ggml_type::f32, d, B);
    a.q = lb.add(ggml_type::f32, d, B);
    a.k = lb.add(ggml_type::f32, kv, B);
    a.v = lb.add(ggml_type::f32, kv, B);
    a.att = lb.add(ggml_type::f32, d, B);
    a.tmp = lb.add(ggml_type::f32, d, B);
    if (spec.host) {
        a.u = lb.add(ggml_type::f32, ff, B);
        a.g = lb.add(ggml_type::f32, ff, B);
    }
    if (m.sparse_file()) {
        a.predictor_hidden_offset = lb.reserve(sizeof(float) * static_cast<size_t>(B) *
                                               static_cast<size_t>(m.max_predictor_rank()));
        a.p = lb.add(ggml_type::f32, ff, B);
        a.idx = lb.add(ggml_type::i32, ff, B);
        if (spec.host && !m.sparse_inference()) {
            a.all_idx = lb.add(ggml_type::i32, ff, B);
            a.all_count = lb.add(ggml_type::i32, B, 1);
        }
    }
    if (spec.audit) {
        a.audit_up = lb.add(ggml_type::f32, ff, B);
        a.audit_gate = lb.add(ggml_type::f32, ff, B);
    }
    if (spec.max_hot > 0) {
        a.hot_idx = lb.add(ggml_type::i32, spec.max_hot, B);
        a.hot_count = lb.add(ggml_type::i32, B, 1);
        a.hot_up = lb.add(ggml_type::f32, spec.max_hot, B);
        a.hot_gate = lb.add(ggml_type::f32, spec.max_hot, B);
        a.partial = lb.add(ggml_type::f32, d, B);
    }
    a.xo = lb.add(ggml_type::f32, d, spec.logits_rows);
    a.logits = lb.add(ggml_type::f32, h.n_vocab, spec.logits_rows);
    if (!spec.host && m.sparse_file()) a.layer_counts = lb.add(ggml_type::i32, B * h.n_layer, 1);
    a.size = lb.size();
    return a;
}

arena_spec device_arena_spec(int64_t n_batch, int64_t max_hot) {
    return arena_spec{n_batch, false, false, std::max<int64_t>(max_hot, 1),
                      std::min<int64_t>(n_batch, 16)};
}

uint64_t device_arena_bytes(const model& m, int32_t n_batch, int32_t max_hot) {
    return layout_arena(m, device_arena_spec(n_batch, max_hot)).size;
}

arena::arena(device& dev, const model& m, const arena_spec& spec, device* pinned_by)
    : tensors_(layout_arena(m, spec)),
      pinned_(pinned_by ? pinned_by->host_alloc(tensors_.size) : host_memory{}),
      memory_(pinned_by ? dev.wrap_host(pinned_.get(), tensors_.size) : dev.alloc(tensors_.size)) {
    arena_tensors& a = tensors_;
    a.mem = memory_.get();
    for (pib_tensor* t : {&a.ids,         &a.pos,        &a.cells,   &a.out_rows,
                          &a.count,       &a.all_count,  &a.x,       &a.xn,
                          &a.q,           &a.k,          &a.v,       &a.att,
                          &a.tmp,         &a.p,          &a.idx,     &a.all_idx,
                          &a.u,           &a.g,          &a.xo,      &a.logits,
                          &a.audit_up,    &a.audit_gate, &a.hot_idx, &a.hot_count,
                          &a.hot_up,      &a.hot_gate,   &a.partial, &a.position_rows,
                          &a.layer_counts})
        t->buffer = a.mem;
    if (dev.vt().buffer_host_ptr)
        host_data_ = static_cast<uint8_t*>(dev.vt().buffer_host_ptr(dev.ctx(), a.mem));
}

size_t arena::pack_batch_inputs(int64_t n_tokens) noexcept {
    arena_tensors& a = tensors_;
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(n_tokens);
    a.pos.offset = a.batch_inputs_offset;
    a.cells.offset = a.pos.offset + bytes;
    a.out_rows.offset = a.cells.offset + bytes;
    return a.pos.offset;
}

} // namespace pi
