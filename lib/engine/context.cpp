#include "engine/context.hpp"
#include "engine/context_arena.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "engine/offload.hpp"
#include "support/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {

namespace {

constexpr size_t arena_alignment = 64;

// Appends a tensor of `rows` rows of `cols` elements to a layout being measured.
class layout_builder {
  public:
    explicit layout_builder(size_t alignment = arena_alignment) : alignment_(alignment) {}
    pib_tensor add(ggml_type type, int64_t cols, int64_t rows) {
        const pib_tensor t{static_cast<uint32_t>(type), cols,    rows,
                           row_bytes(type, cols),       nullptr, size_};
        size_ += (t.nb1 * static_cast<size_t>(rows) + alignment_ - 1) / alignment_ * alignment_;
        return t;
    }
    size_t reserve(size_t bytes) {
        const size_t off = size_;
        size_ += (bytes + alignment_ - 1) / alignment_ * alignment_;
        return off;
    }
    size_t size() const noexcept { return size_; }

  private:
    size_t alignment_;
    size_t size_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

uint64_t bytes_of(const pib_tensor& t) {
    return static_cast<uint64_t>(t.nb1) * static_cast<uint64_t>(t.ne1);
}

} // namespace

// The one definition of an arena's layout: the allocations and the planner's scratch estimate
// both use it.
size_t context::layout_arena(arena_layout& a, const model& m, const arena_spec& spec) {
    const hparams& h = m.hp();
    const int64_t B = spec.n_batch, d = h.n_embd, kv = h.n_embd_kv(), ff = h.n_ff;
    layout_builder lb;
    if (spec.host) {
        a.ids = lb.add(ggml_type::i32, B, 1);
        a.kv_pos = lb.add(ggml_type::i32, spec.n_ctx, 1);
    }
    a.pos = lb.add(ggml_type::i32, B, 1);
    a.out_rows = lb.add(ggml_type::i32, B, 1);
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
        a.z_offset = lb.reserve(sizeof(float) * static_cast<size_t>(B) *
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
    a.size = lb.size();
    return a.size;
}

// Logits take n_vocab floats a row: the device computes them a few rows at a time.
context::arena_spec context::device_arena_spec(int64_t n_batch, int64_t max_hot) {
    return arena_spec{
        n_batch, 1, false, false, std::max<int64_t>(max_hot, 1), std::min<int64_t>(n_batch, 16)};
}

uint64_t context::device_scratch_bytes(const model& m, int32_t n_batch, int32_t max_hot) {
    arena_layout a;
    return layout_arena(a, m, device_arena_spec(n_batch, max_hot));
}

uint64_t context::device_kv_layer_bytes(const hparams& h, int32_t n_ctx) {
    layout_builder lb(device_tensor_alignment);
    lb.add(ggml_type::f16, h.n_embd_kv(), n_ctx);
    lb.add(ggml_type::f16, h.n_embd_kv(), n_ctx);
    lb.add(ggml_type::i32, n_ctx, 1);
    return lb.size();
}

context::context(const model& m, const context_options& options) : model_(m), options_(options) {
    const hparams& h = m.hp();
    if (options_.n_ctx <= 0)
        fail(status::invalid_argument, "n_ctx must be positive (got ", options_.n_ctx, ")");
    if (options_.n_ctx > (1 << 22))
        fail(status::invalid_argument, "n_ctx ", options_.n_ctx, " is too large");
    if (options_.n_batch <= 0)
        fail(status::invalid_argument, "n_batch must be positive (got ", options_.n_batch, ")");
    if (options_.n_threads <= 0)
        fail(status::invalid_argument, "n_threads must be at least 1 (got ", options_.n_threads,
             ")");
    if (options_.n_threads > 1024)
        fail(status::invalid_argument, "n_threads ", options_.n_threads, " is absurd");
    options_.n_batch = std::min(options_.n_batch, options_.n_ctx);
    const offload* off = options_.offloaded;
    if (off) {
        if (!m.sparse_inference())
            fail(status::invalid_argument, "offloading needs sparse inference");
        if (off->n_layers() != static_cast<size_t>(h.n_layer))
            fail(status::invalid_argument, "the offload plan does not belong to this model");
        options_.n_batch = std::min(options_.n_batch, max_offload_batch);
    }

    dev_ = std::make_unique<device>(device::cpu(options_.n_threads));
    at_ = std::make_unique<arena_layout>();
    arena_layout& a = *at_;
    const int64_t B = options_.n_batch, kv = h.n_embd_kv(), ff = h.n_ff;
    const bool audit = options_.audit_predictor && m.sparse_inference();
    layout_arena(a, m, arena_spec{B, options_.n_ctx, true, audit, 0, B});
    arena_ = dev_->alloc(a.size);
    a.mem = arena_.get();
    for (pib_tensor* t :
         {&a.ids, &a.pos, &a.out_rows, &a.kv_pos, &a.count,    &a.all_count, &a.x,   &a.xn,
          &a.q,   &a.k,   &a.v,        &a.att,    &a.tmp,      &a.p,         &a.idx, &a.all_idx,
          &a.u,   &a.g,   &a.xo,       &a.logits, &a.audit_up, &a.audit_gate})
        t->buffer = arena_.get();
    host_base_ = static_cast<uint8_t*>(dev_->vt().buffer_host_ptr(dev_->ctx(), arena_.get()));
    if (!host_base_) fail(status::internal, "the CPU arena is not host-visible");

    // The KV cache of a layer lives where its attention scores are computed.
    const ggml_type kv_type = options_.kv_f16 ? ggml_type::f16 : ggml_type::f32;
    bool any_device_attention = false;
    for (size_t il = 0; off && il < off->n_layers(); ++il)
        any_device_attention |= off->layer(il).has_attn();
    kv_dev_ = any_device_attention && off->kv_n_ctx() > 0 && options_.n_ctx <= off->kv_n_ctx() &&
              options_.kv_f16;
    if (any_device_attention && off->kv_n_ctx() > 0 && !kv_dev_)
        log(log_level::info, concat("the KV cache stays in host memory: the device reserved ",
                                    off->kv_n_ctx(), " F16 cells, the context asks for ",
                                    options_.n_ctx, options_.kv_f16 ? " cells" : " F32 cells"));
    std::vector<bool> kv_here(static_cast<size_t>(h.n_layer), true);
    if (kv_dev_)
        for (size_t il = 0; il < kv_here.size(); ++il)
            kv_here[il] = !off->layer(il).has_attn();
    const size_t cache_bytes = row_bytes(kv_type, kv) * static_cast<size_t>(options_.n_ctx);
    const auto host_layers = static_cast<size_t>(std::count(kv_here.begin(), kv_here.end(), true));
    if (host_layers > 0) kv_ = dev_->alloc(cache_bytes * 2 * host_layers);
    a.k_cache.resize(static_cast<size_t>(h.n_layer));
    a.v_cache.resize(static_cast<size_t>(h.n_layer));
    for (size_t il = 0, slot = 0; il < kv_here.size(); ++il) {
        if (!kv_here[il]) continue;
        a.k_cache[il] = view(kv_, cache_bytes * (2 * slot), kv_type, kv, options_.n_ctx);
        a.v_cache[il] = view(kv_, cache_bytes * (2 * slot + 1), kv_type, kv, options_.n_ctx);
        ++slot;
    }

    if (m.sparse_file() && !m.sparse_inference()) {
        std::vector<int32_t> iota(static_cast<size_t>(ff));
        std::iota(iota.begin(), iota.end(), 0);
        for (int64_t r = 0; r < B; ++r)
            dev_->upload(arena_, a.all_idx.offset + a.all_idx.nb1 * static_cast<size_t>(r),
                         iota.data(), iota.size() * sizeof(int32_t));
        const std::vector<int32_t> counts(static_cast<size_t>(B), static_cast<int32_t>(ff));
        dev_->upload(arena_, a.all_count.offset, counts.data(), counts.size() * sizeof(int32_t));
    }

    layer_active_.assign(static_cast<size_t>(h.n_layer), 0);
    kv_pos_host_.assign(static_cast<size_t>(options_.n_ctx), -1);
    dev_->upload(arena_, a.kv_pos.offset, kv_pos_host_.data(),
                 kv_pos_host_.size() * sizeof(int32_t));
    pos_host_.resize(static_cast<size_t>(B));
    out_rows_host_.resize(static_cast<size_t>(B));
    counts_host_.resize(static_cast<size_t>(B));
    logits_.resize(static_cast<size_t>(B) * static_cast<size_t>(h.n_vocab));
    logits_row_of_token_.assign(static_cast<size_t>(B), -1);
    if (off) {
        device& dd = off->dev();
        dl_ = std::make_unique<arena_layout>();
        arena_layout& d = *dl_;
        layout_arena(d, m, device_arena_spec(B, off->max_hot()));
        device_arena_ = dd.alloc(d.size);
        d.mem = device_arena_.get();
        for (pib_tensor* t : {&d.pos, &d.out_rows, &d.count, &d.x, &d.xn, &d.q, &d.k, &d.v, &d.att,
                              &d.tmp, &d.p, &d.idx, &d.xo, &d.logits, &d.hot_idx, &d.hot_count,
                              &d.hot_up, &d.hot_gate, &d.partial})
            t->buffer = device_arena_.get();
        if (kv_dev_) {
            layout_builder kb(device_tensor_alignment);
            d.k_cache.resize(static_cast<size_t>(h.n_layer));
            d.v_cache.resize(static_cast<size_t>(h.n_layer));
            for (size_t il = 0; il < kv_here.size(); ++il) {
                if (kv_here[il]) continue;
                d.k_cache[il] = kb.add(ggml_type::f16, kv, options_.n_ctx);
                d.v_cache[il] = kb.add(ggml_type::f16, kv, options_.n_ctx);
            }
            d.kv_pos = kb.add(ggml_type::i32, options_.n_ctx, 1);
            device_kv_ = dd.alloc(kb.size());
            for (size_t il = 0; il < kv_here.size(); ++il)
                if (!kv_here[il]) d.k_cache[il].buffer = d.v_cache[il].buffer = device_kv_.get();
            d.kv_pos.buffer = device_kv_.get();
            dd.upload(device_kv_, d.kv_pos.offset, kv_pos_host_.data(),
                      kv_pos_host_.size() * sizeof(int32_t));
        }
        idx_host_.resize(static_cast<size_t>(B * ff));
        hot_idx_host_.resize(static_cast<size_t>(B * d.hot_idx.ne0));
        hot_count_host_.resize(static_cast<size_t>(B));
        worker_ = std::thread([this] { worker_loop(); });
    }
    if (audit) {
        audits_.resize(static_cast<size_t>(h.n_layer));
        audit_act_host_.resize(static_cast<size_t>(B * ff));
        audit_mark_.resize(static_cast<size_t>(ff));
    }
    if (audit || options_.count_activations) audit_idx_host_.resize(static_cast<size_t>(B * ff));
    if (options_.count_activations && m.sparse_inference())
        activation_counts_.assign(static_cast<size_t>(h.n_layer),
                                  std::vector<float>(static_cast<size_t>(ff), 0.0f));
}

void context::count_layer(size_t il, int32_t n) {
    const arena_layout& a = *at_;
    std::vector<float>& counts = activation_counts_[il];
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const auto c = static_cast<size_t>(counts_host_[tt]);
        dev_->download(arena_, a.idx.offset + tt * a.idx.nb1, audit_idx_host_.data(),
                       sizeof(int32_t) * c);
        for (size_t j = 0; j < c; ++j)
            counts[static_cast<size_t>(audit_idx_host_[j])] += 1.0f;
    }
}

void context::reset_stats() noexcept {
    stats_ = {};
    std::fill(layer_active_.begin(), layer_active_.end(), 0);
    std::fill(audits_.begin(), audits_.end(), predictor_audit{});
}

// Counts how the predictor's lists compare with the neurons whose activation is truly non-zero.
void context::audit_layer(size_t il, int32_t n) {
    const arena_layout& a = *at_;
    const layer_weights& w = model_.layers()[il];
    device& dv = *dev_;
    const auto ff = static_cast<size_t>(model_.hp().n_ff);
    const pib_tensor xn = first_rows(a.xn, n), up = first_rows(a.audit_up, n),
                     gate = first_rows(a.audit_gate, n);
    const pib_tensor x = first_rows(a.x, n);
    dv.run("FFN norm", &pib_vtable::rms_norm, &x, &model_.layers()[il].ffn_norm,
           model_.hp().rms_eps, &xn);
    dv.run("audit FFN up", &pib_vtable::mul_mat, &w.up, &xn, &up);
    dv.run("audit FFN gate", &pib_vtable::mul_mat, &w.gate, &xn, &gate);
    dv.run("audit FFN activation", &pib_vtable::glu, &gate, &up, static_cast<int32_t>(model_.glu()),
           &up);
    dv.run("synchronize", &pib_vtable::synchronize);
    dv.download(arena_, a.audit_up.offset, audit_act_host_.data(),
                sizeof(float) * ff * static_cast<size_t>(n));
    dv.download(arena_, a.idx.offset, audit_idx_host_.data(),
                sizeof(int32_t) * ff * static_cast<size_t>(n));
    predictor_audit& out = audits_[il];
    for (int32_t t = 0; t < n; ++t) {
        std::fill(audit_mark_.begin(), audit_mark_.end(), 0);
        const int32_t count = counts_host_[static_cast<size_t>(t)];
        for (int32_t k = 0; k < count; ++k)
            audit_mark_[static_cast<size_t>(
                audit_idx_host_[static_cast<size_t>(t) * ff + static_cast<size_t>(k)])] = 1;
        for (size_t i = 0; i < ff; ++i) {
            const bool truly = audit_act_host_[static_cast<size_t>(t) * ff + i] != 0.0f;
            out.true_active += truly;
            out.true_positive += truly && audit_mark_[i];
        }
        out.predicted_active += static_cast<uint64_t>(count);
    }
    out.tokens += static_cast<uint64_t>(n);
}

context::~context() {
    if (worker_.joinable()) {
        {
            std::lock_guard lock(worker_mutex_);
            worker_stop_ = true;
        }
        worker_cv_.notify_all();
        worker_.join();
    }
}

void context::check_cancel() const {
    if (cancel_.load(std::memory_order_relaxed)) fail(status::cancelled, "decoding cancelled");
}

void context::truncate(int32_t pos) {
    if (pos < 0) fail(status::invalid_argument, "truncate position ", pos, " is negative");
    std::vector<int32_t> forget;
    for (size_t c = 0; c < kv_pos_host_.size(); ++c)
        if (kv_pos_host_[c] >= pos) forget.push_back(static_cast<int32_t>(c));
    forget_cells(forget);
    n_past_ = std::min(n_past_, pos);
}

void context::forget_cells(std::span<const int32_t> cells) {
    for (int32_t c : cells)
        kv_pos_host_[static_cast<size_t>(c)] = -1;
    dev_->upload(arena_, at_->kv_pos.offset, kv_pos_host_.data(),
                 kv_pos_host_.size() * sizeof(int32_t));
    if (kv_dev_)
        options_.offloaded->dev().upload(device_kv_, dl_->kv_pos.offset, kv_pos_host_.data(),
                                         kv_pos_host_.size() * sizeof(int32_t));
}

void context::decode(const batch_view& batch) {
    const hparams& h = model_.hp();
    const auto n = static_cast<int32_t>(batch.tokens.size());
    if (n <= 0) fail(status::invalid_argument, "the batch is empty");
    if (n > options_.n_batch)
        fail(status::invalid_argument, "the batch has ", n,
             " tokens, more than n_batch = ", options_.n_batch);
    if (!batch.pos.empty() && batch.pos.size() != batch.tokens.size())
        fail(status::invalid_argument, "the batch has ", batch.pos.size(), " positions for ", n,
             " tokens");
    if (!batch.logits.empty() && batch.logits.size() != batch.tokens.size())
        fail(status::invalid_argument, "the batch has ", batch.logits.size(), " logits flags for ",
             n, " tokens");
    for (int32_t i = 0; i < n; ++i) {
        const int32_t t = batch.tokens[static_cast<size_t>(i)];
        if (t < 0 || t >= h.n_vocab)
            fail(status::invalid_argument, "token ", i, " of the batch has id ", t,
                 ", outside the vocabulary [0, ", h.n_vocab, ")");
        const int32_t p = batch.pos.empty() ? n_past_ + i : batch.pos[static_cast<size_t>(i)];
        if (p < 0)
            fail(status::invalid_argument, "token ", i, " of the batch has negative position ", p);
        if (p >= options_.n_ctx)
            fail(status::context_full, "position ", p,
                 " does not fit in the context (n_ctx = ", options_.n_ctx, ")");
        pos_host_[static_cast<size_t>(i)] = p;
    }
    const std::span<const int32_t> positions(pos_host_.data(), static_cast<size_t>(n));
    {
        std::vector<int32_t>& seen = counts_host_; // reused scratch: detect duplicate positions
        std::copy(positions.begin(), positions.end(), seen.begin());
        std::sort(seen.begin(), seen.begin() + n);
        if (std::adjacent_find(seen.begin(), seen.begin() + n) != seen.begin() + n)
            fail(status::invalid_argument, "the batch holds two tokens at the same position");
    }

    n_outputs_ = 0;
    std::fill(logits_row_of_token_.begin(), logits_row_of_token_.end(), -1);
    for (int32_t i = 0; i < n; ++i) {
        const bool wanted =
            batch.logits.empty() ? i == n - 1 : batch.logits[static_cast<size_t>(i)] != 0;
        if (!wanted) continue;
        logits_row_of_token_[static_cast<size_t>(i)] = n_outputs_;
        out_rows_host_[static_cast<size_t>(n_outputs_++)] = i;
    }

    const auto start = std::chrono::steady_clock::now();
    const arena_layout& a = *at_;
    dev_->upload(arena_, a.ids.offset, batch.tokens.data(),
                 sizeof(int32_t) * static_cast<size_t>(n));
    for (int32_t p : positions)
        kv_pos_host_[static_cast<size_t>(p)] = p;
    upload_positions(n);
    n_kv_ = 0;
    for (int32_t c = options_.n_ctx - 1; c >= 0 && n_kv_ == 0; --c)
        if (kv_pos_host_[static_cast<size_t>(c)] >= 0) n_kv_ = c + 1;
    try {
        forward(n,
                std::span<const int32_t>(out_rows_host_.data(), static_cast<size_t>(n_outputs_)));
    } catch (...) {
        forget_cells(positions);
        n_outputs_ = 0;
        std::fill(logits_row_of_token_.begin(), logits_row_of_token_.end(), -1);
        n_past_ = std::min(n_past_, *std::min_element(positions.begin(), positions.end()));
        throw;
    }
    n_past_ = std::max(n_past_, *std::max_element(positions.begin(), positions.end()) + 1);

    const double secs = seconds_since(start);
    if (n == 1) {
        stats_.n_decode_tokens += 1;
        stats_.decode_seconds += secs;
    } else {
        stats_.n_prompt_tokens += static_cast<uint64_t>(n);
        stats_.prompt_seconds += secs;
    }
}

void context::forward(int32_t n, std::span<const int32_t> out_rows) {
    const arena_layout& a = *at_;
    const pib_tensor x = first_rows(a.x, n);
    pib_tensor ids = a.ids;
    ids.ne0 = n;
    dev_->run("token embedding lookup", &pib_vtable::get_rows, &model_.token_embd(), &ids, &x);
    x_on_host_ = true;
    x_on_device_ = false;

    for (size_t il = 0; il < static_cast<size_t>(model_.hp().n_layer); ++il) {
        check_cancel();
        attention_block(il, n);
        ffn_block(il, n);
    }
    check_cancel();
    output_block(n, out_rows);
}

void context::output_block(int32_t n, std::span<const int32_t> out_rows) {
    const hparams& h = model_.hp();
    if (out_rows.empty()) return;
    const offload* off = options_.offloaded;
    const bool on_device = off && off->has_output();
    device& dv = on_device ? off->dev() : *dev_;
    const arena_layout& a = on_device ? *dl_ : *at_;
    const pib_tensor& norm = on_device ? off->output_norm() : model_.output_norm();
    const pib_tensor& out = on_device ? off->output() : model_.output();
    if (on_device)
        x_to_device(n);
    else
        x_to_host(n);
    const pib_tensor x = first_rows(a.x, n);
    const auto vocab = static_cast<size_t>(h.n_vocab);
    for (size_t done = 0; done < out_rows.size();) {
        const size_t now = std::min(out_rows.size() - done, static_cast<size_t>(a.logits.ne1));
        dv.run("uploading output rows", &pib_vtable::buffer_upload, a.mem, a.out_rows.offset,
               out_rows.data() + done, now * sizeof(int32_t));
        pib_tensor rows = a.out_rows;
        rows.ne0 = static_cast<int64_t>(now);
        const pib_tensor xo = first_rows(a.xo, rows.ne0), logits = first_rows(a.logits, rows.ne0);
        dv.run("gathering output rows", &pib_vtable::get_rows, &x, &rows, &xo);
        dv.run("output norm", &pib_vtable::rms_norm, &xo, &norm, h.rms_eps, &xo);
        dv.run("output projection", &pib_vtable::mul_mat, &out, &xo, &logits);
        dv.run("synchronize", &pib_vtable::synchronize);
        dv.run("downloading logits", &pib_vtable::buffer_download, a.mem, a.logits.offset,
               logits_.data() + done * vocab, now * vocab * sizeof(float));
        done += now;
    }
    if (n == 1)
        stats_.decode_bytes +=
            bytes_of(model_.output()) + bytes_of(model_.output_norm()) + model_.token_embd().nb1;
}

void context::project_qkv(device& dv, const arena_layout& a, const layer_weights& w, int32_t n) {
    const hparams& h = model_.hp();
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), q = first_rows(a.q, n),
                     k = first_rows(a.k, n), v = first_rows(a.v, n);
    pib_tensor pos = a.pos;
    pos.ne0 = n;
    dv.run("attention norm", &pib_vtable::rms_norm, &x, &w.attn_norm, h.rms_eps, &xn);
    dv.run("Q projection", &pib_vtable::mul_mat, &w.wq, &xn, &q);
    dv.run("K projection", &pib_vtable::mul_mat, &w.wk, &xn, &k);
    dv.run("V projection", &pib_vtable::mul_mat, &w.wv, &xn, &v);
    const pib_rope_params rq{h.n_head,          h.head_dim,       h.n_rot,
                             h.arch->rope_mode, h.rope_freq_base, h.rope_freq_scale};
    const pib_rope_params rk{h.n_head_kv,       h.head_dim,       h.n_rot,
                             h.arch->rope_mode, h.rope_freq_base, h.rope_freq_scale};
    dv.run("RoPE of Q", &pib_vtable::rope, &q, &pos, &rq);
    dv.run("RoPE of K", &pib_vtable::rope, &k, &pos, &rk);
}

void context::store_and_attend(device& dv, const arena_layout& a, size_t il, int32_t n) {
    const hparams& h = model_.hp();
    const pib_tensor q = first_rows(a.q, n), k = first_rows(a.k, n), v = first_rows(a.v, n),
                     att = first_rows(a.att, n);
    pib_tensor pos = a.pos;
    pos.ne0 = n;
    dv.run("storing K", &pib_vtable::set_rows, &k, &pos, &a.k_cache[il]);
    dv.run("storing V", &pib_vtable::set_rows, &v, &pos, &a.v_cache[il]);
    const pib_attention_params ap{h.n_head, h.n_head_kv, h.head_dim, n_kv_,
                                  1.0f / std::sqrt(static_cast<float>(h.head_dim))};
    pib_tensor kv_pos = a.kv_pos;
    kv_pos.ne0 = n_kv_;
    dv.run("attention", &pib_vtable::attention, &q, &a.k_cache[il], &a.v_cache[il], &pos, &kv_pos,
           &ap, &att);
}

void context::project_out(device& dv, const arena_layout& a, const layer_weights& w, int32_t n) {
    const pib_tensor x = first_rows(a.x, n), att = first_rows(a.att, n), tmp = first_rows(a.tmp, n);
    dv.run("attention output projection", &pib_vtable::mul_mat, &w.wo, &att, &tmp);
    dv.run("attention residual", &pib_vtable::add, &x, &tmp, &x);
}

void context::attention_block(size_t il, int32_t n) {
    const layer_weights& w = model_.layers()[il];
    const offload_layer* ol = offloaded_layer(il);
    if (ol && ol->has_attn()) {
        device& dd = options_.offloaded->dev();
        const arena_layout& d = *dl_;
        x_to_device(n);
        project_qkv(dd, d, ol->dense, n);
        if (kv_dev_) {
            store_and_attend(dd, d, il, n);
        } else {
            // Attention scores where the KV cache is: Q, K and V come over, the result goes back.
            dd.run("synchronize", &pib_vtable::synchronize);
            for (auto [dev_t, host_t] :
                 {std::pair{&d.q, &at_->q}, std::pair{&d.k, &at_->k}, std::pair{&d.v, &at_->v}})
                device_to_host(*dev_t, *host_t, dev_t->nb1 * static_cast<size_t>(n));
            store_and_attend(*dev_, *at_, il, n);
            host_to_device(at_->att, d.att, d.att.nb1 * static_cast<size_t>(n));
        }
        project_out(dd, d, ol->dense, n);
        x_on_host_ = false;
    } else {
        x_to_host(n);
        project_qkv(*dev_, *at_, w, n);
        store_and_attend(*dev_, *at_, il, n);
        project_out(*dev_, *at_, w, n);
        x_on_device_ = false;
    }
    if (n == 1)
        stats_.decode_bytes += bytes_of(w.attn_norm) + bytes_of(w.wq) + bytes_of(w.wk) +
                               bytes_of(w.wv) + bytes_of(w.wo) +
                               2 * static_cast<uint64_t>(n_kv_) *
                                   row_bytes(options_.kv_f16 ? ggml_type::f16 : ggml_type::f32,
                                             model_.hp().n_embd_kv());
}

void context::predict(device& dv, const arena_layout& a, const layer_weights& w, int32_t n) {
    const pib_tensor x = first_rows(a.x, n), p = first_rows(a.p, n), idx = first_rows(a.idx, n);
    const pib_tensor z{static_cast<uint32_t>(ggml_type::f32),
                       w.predictor_rank,
                       n,
                       row_bytes(ggml_type::f32, w.predictor_rank),
                       a.mem,
                       a.z_offset};
    pib_tensor count = a.count;
    count.ne0 = n;
    // The predictor reads the residual before ffn_norm (docs/file-format.md).
    dv.run("predictor fc1", &pib_vtable::mul_mat, &w.fc1, &x, &z);
    dv.run("predictor ReLU", &pib_vtable::relu, &z, &z);
    dv.run("predictor fc2", &pib_vtable::mul_mat, &w.fc2, &z, &p);
    dv.run("selecting active neurons", &pib_vtable::select_active, &p, model_.sparse_threshold(),
           &idx, &count);
    dv.run("synchronize", &pib_vtable::synchronize);
    dv.run("downloading active counts", &pib_vtable::buffer_download, a.mem, a.count.offset,
           counts_host_.data(), sizeof(int32_t) * static_cast<size_t>(n));
}

void context::ffn_block(size_t il, int32_t n) {
    const arena_layout& a = *at_;
    const hparams& h = model_.hp();
    const layer_weights& w = model_.layers()[il];
    device& dv = *dev_;
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), u = first_rows(a.u, n),
                     g = first_rows(a.g, n);
    const int32_t glu = model_.glu();

    if (model_.sparse_inference()) {
        const offload_layer* ol = offloaded_layer(il);
        // Audits and calibration counts read the lists on the host.
        const bool predict_on_device =
            ol && ol->has_predictor() && audits_.empty() && activation_counts_.empty();
        if (predict_on_device) {
            x_to_device(n);
            predict(options_.offloaded->dev(), *dl_, ol->dense, n);
        } else {
            x_to_host(n);
            predict(dv, a, w, n);
        }
        uint64_t active = 0;
        for (int32_t i = 0; i < n; ++i)
            active += static_cast<uint64_t>(counts_host_[static_cast<size_t>(i)]);
        // Rows of ffn_down_t a decoded token reads: the accumulate skips listed rows whose
        // activation is zero (a predictor's false positives); counted where the whole FFN runs
        // on the host (a hybrid or device layer counts every listed row).
        uint64_t down_rows = active;
        if (!audits_.empty()) audit_layer(il, n);
        if (!activation_counts_.empty()) count_layer(il, n);
        if (predict_on_device && ol->all_hot(h.n_ff) && ol->has_ffn_norm()) {
            device_ffn(il, n);
        } else if (ol && !ol->hot.empty()) {
            x_to_host(n);
            dv.run("FFN norm", &pib_vtable::rms_norm, &x, &w.ffn_norm, h.rms_eps, &xn);
            hybrid_ffn(il, n, predict_on_device);
            x_on_device_ = false;
        } else {
            if (predict_on_device) lists_to_host(n);
            x_to_host(n);
            const pib_tensor idx = first_rows(a.idx, n);
            pib_tensor count = a.count;
            count.ne0 = n;
            dv.run("FFN norm", &pib_vtable::rms_norm, &x, &w.ffn_norm, h.rms_eps, &xn);
            dv.mul_mat_sparse2("sparse FFN up and gate", w.up, w.gate, xn, idx, count, u, g);
            dv.run("FFN activation", &pib_vtable::glu, &g, &u, glu, &u);
            observe_ffn(il, n);
            dv.run("sparse FFN down", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count, &x);
            x_on_device_ = false;
            if (n == 1) down_rows = nonzero_activations();
        }
        stats_.ffn_active_neurons += active;
        layer_active_[il] += active;
        stats_.ffn_total_neurons += static_cast<uint64_t>(n) * static_cast<uint64_t>(h.n_ff);
        if (n == 1)
            stats_.decode_bytes += bytes_of(w.ffn_norm) + bytes_of(w.fc1) + bytes_of(w.fc2) +
                                   active * (w.up.nb1 + w.gate.nb1) + down_rows * w.down_t.nb1;
        return;
    }
    dv.run("FFN norm", &pib_vtable::rms_norm, &x, &w.ffn_norm, h.rms_eps, &xn);
    dv.run("FFN up", &pib_vtable::mul_mat, &w.up, &xn, &u);
    dv.run("FFN gate", &pib_vtable::mul_mat, &w.gate, &xn, &g);
    dv.run("FFN activation", &pib_vtable::glu, &g, &u, glu, &u);
    observe_ffn(il, n);
    if (model_.sparse_file()) {
        // Forced dense mode on a sparse file: the down projection runs over every row of
        // ffn_down_t.
        const pib_tensor idx = first_rows(a.all_idx, n);
        pib_tensor count = a.all_count;
        count.ne0 = n;
        dv.run("FFN down (all neurons)", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count, &x);
    } else {
        const pib_tensor tmp = first_rows(a.tmp, n);
        dv.run("FFN down", &pib_vtable::mul_mat, &w.down, &u, &tmp);
        dv.run("FFN residual", &pib_vtable::add, &x, &tmp, &x);
    }
    stats_.ffn_active_neurons += static_cast<uint64_t>(n) * static_cast<uint64_t>(h.n_ff);
    layer_active_[il] += static_cast<uint64_t>(n) * static_cast<uint64_t>(h.n_ff);
    stats_.ffn_total_neurons += static_cast<uint64_t>(n) * static_cast<uint64_t>(h.n_ff);
    if (n == 1) {
        uint64_t down = bytes_of(w.down);
        if (model_.sparse_file()) {
            // The accumulate over ffn_down_t skips the rows whose activation is zero (most of
            // them after a ReLU) and never reads them.
            down = nonzero_activations() * w.down_t.nb1;
        }
        stats_.decode_bytes += bytes_of(w.ffn_norm) + bytes_of(w.up) + bytes_of(w.gate) + down;
    }
}

uint64_t context::nonzero_activations() {
    dev_->run("synchronize", &pib_vtable::synchronize);
    const auto* act = reinterpret_cast<const float*>(host_base_ + at_->u.offset);
    return static_cast<uint64_t>(
        std::count_if(act, act + model_.hp().n_ff, [](float v) { return v != 0.0f; }));
}

std::span<const float> context::logits(int32_t i) const noexcept {
    const auto nv = static_cast<size_t>(model_.hp().n_vocab);
    int32_t row = -1;
    if (i == -1)
        row = n_outputs_ - 1;
    else if (i >= 0 && static_cast<size_t>(i) < logits_row_of_token_.size())
        row = logits_row_of_token_[static_cast<size_t>(i)];
    if (row < 0) return {};
    return std::span<const float>(logits_.data() + static_cast<size_t>(row) * nv, nv);
}

} // namespace pi
