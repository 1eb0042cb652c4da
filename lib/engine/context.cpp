#include "engine/context.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "engine/offload.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {

// Views of every activation tensor inside the arena, each sized for n_batch rows.
struct context::arena_layout {
    pib_tensor ids, pos, out_rows, kv_pos, count, all_count;
    pib_tensor x, xn, q, k, v, att, tmp;
    size_t z_offset = 0;
    pib_tensor p, idx, all_idx, u, g;
    pib_tensor xo, logits;
    pib_tensor audit_up, audit_gate; // dense FFN activations for the predictor audit
    std::vector<pib_tensor> k_cache, v_cache;
    size_t size = 0;
};

// Activations of the device half of a hybrid FFN, in the offload device's memory.
struct context::device_arena {
    pib_tensor xn, idx, count, up, gate, partial;
    buffer mem;
};

namespace {

constexpr size_t arena_alignment = 64;

// Appends a tensor of `rows` rows of `cols` elements to a layout being measured.
class layout_builder {
public:
    pib_tensor add(ggml_type type, int64_t cols, int64_t rows) {
        const pib_tensor t{static_cast<uint32_t>(type), cols, rows, row_bytes(type, cols), nullptr, size_};
        size_ += (t.nb1 * static_cast<size_t>(rows) + arena_alignment - 1) / arena_alignment * arena_alignment;
        return t;
    }
    size_t reserve(size_t bytes) {
        const size_t off = size_;
        size_ += (bytes + arena_alignment - 1) / arena_alignment * arena_alignment;
        return off;
    }
    size_t size() const noexcept { return size_; }

private:
    size_t size_ = 0;
};

void place(pib_tensor& t, const buffer& b) { t.buffer = b.get(); }

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

uint64_t bytes_of(const pib_tensor& t) { return static_cast<uint64_t>(t.nb1) * static_cast<uint64_t>(t.ne1); }

} // namespace

// The device arena's layout: the one definition that both the allocation and the planner's
// scratch estimate use.
size_t context::layout_device_arena(device_arena& t, const hparams& h, int64_t n_batch, int64_t max_hot) {
    layout_builder db;
    t.xn = db.add(ggml_type::f32, h.n_embd, n_batch);
    t.idx = db.add(ggml_type::i32, max_hot, n_batch);
    t.count = db.add(ggml_type::i32, n_batch, 1);
    t.up = db.add(ggml_type::f32, max_hot, n_batch);
    t.gate = db.add(ggml_type::f32, max_hot, n_batch);
    t.partial = db.add(ggml_type::f32, h.n_embd, n_batch);
    return db.size();
}

context::context(const model& m, const context_options& options) : model_(m), options_(options) {
    const hparams& h = m.hp();
    if (options_.n_ctx <= 0) fail(status::invalid_argument, "n_ctx must be positive (got ", options_.n_ctx, ")");
    if (options_.n_ctx > (1 << 22)) fail(status::invalid_argument, "n_ctx ", options_.n_ctx, " is too large");
    if (options_.n_batch <= 0) fail(status::invalid_argument, "n_batch must be positive (got ", options_.n_batch, ")");
    if (options_.n_threads <= 0)
        fail(status::invalid_argument, "n_threads must be at least 1 (got ", options_.n_threads, ")");
    if (options_.n_threads > 1024) fail(status::invalid_argument, "n_threads ", options_.n_threads, " is absurd");
    options_.n_batch = std::min(options_.n_batch, options_.n_ctx);

    dev_ = std::make_unique<device>(device::cpu(options_.n_threads));
    at_ = std::make_unique<arena_layout>();
    arena_layout& a = *at_;
    const int64_t B = options_.n_batch, d = h.n_embd, kv = h.n_embd_kv(), ff = h.n_ff;
    layout_builder lb;
    a.ids = lb.add(ggml_type::i32, B, 1);
    a.pos = lb.add(ggml_type::i32, B, 1);
    a.out_rows = lb.add(ggml_type::i32, B, 1);
    a.kv_pos = lb.add(ggml_type::i32, options_.n_ctx, 1);
    a.count = lb.add(ggml_type::i32, B, 1);
    a.x = lb.add(ggml_type::f32, d, B);
    a.xn = lb.add(ggml_type::f32, d, B);
    a.q = lb.add(ggml_type::f32, d, B);
    a.k = lb.add(ggml_type::f32, kv, B);
    a.v = lb.add(ggml_type::f32, kv, B);
    a.att = lb.add(ggml_type::f32, d, B);
    a.tmp = lb.add(ggml_type::f32, d, B);
    a.u = lb.add(ggml_type::f32, ff, B);
    a.g = lb.add(ggml_type::f32, ff, B);
    if (m.sparse_file()) {
        a.z_offset = lb.reserve(sizeof(float) * static_cast<size_t>(B) * static_cast<size_t>(m.max_predictor_rank()));
        a.p = lb.add(ggml_type::f32, ff, B);
        a.idx = lb.add(ggml_type::i32, ff, B);
        if (!m.sparse_inference()) {
            a.all_idx = lb.add(ggml_type::i32, ff, B);
            a.all_count = lb.add(ggml_type::i32, B, 1);
        }
    }
    const bool audit = options_.audit_predictor && m.sparse_inference();
    if (audit) {
        a.audit_up = lb.add(ggml_type::f32, ff, B);
        a.audit_gate = lb.add(ggml_type::f32, ff, B);
    }
    a.xo = lb.add(ggml_type::f32, d, B);
    a.logits = lb.add(ggml_type::f32, h.n_vocab, B);
    a.size = lb.size();
    arena_ = dev_->alloc(a.size);
    for (pib_tensor* t : {&a.ids, &a.pos, &a.out_rows, &a.kv_pos, &a.count, &a.all_count, &a.x, &a.xn, &a.q,
                          &a.k, &a.v, &a.att, &a.tmp, &a.p, &a.idx, &a.all_idx, &a.u, &a.g, &a.xo, &a.logits, &a.audit_up, &a.audit_gate})
        place(*t, arena_);

    const ggml_type kv_type = options_.kv_f16 ? ggml_type::f16 : ggml_type::f32;
    const size_t cache_bytes = row_bytes(kv_type, kv) * static_cast<size_t>(options_.n_ctx);
    kv_ = dev_->alloc(cache_bytes * 2 * static_cast<size_t>(h.n_layer));
    for (int32_t il = 0; il < h.n_layer; ++il) {
        a.k_cache.push_back(view(kv_, cache_bytes * (2 * static_cast<size_t>(il)), kv_type, kv, options_.n_ctx));
        a.v_cache.push_back(view(kv_, cache_bytes * (2 * static_cast<size_t>(il) + 1), kv_type, kv, options_.n_ctx));
    }

    if (m.sparse_file() && !m.sparse_inference()) {
        std::vector<int32_t> iota(static_cast<size_t>(ff));
        std::iota(iota.begin(), iota.end(), 0);
        for (int64_t r = 0; r < B; ++r)
            dev_->upload(arena_, a.all_idx.offset + a.all_idx.nb1 * static_cast<size_t>(r), iota.data(),
                         iota.size() * sizeof(int32_t));
        const std::vector<int32_t> counts(static_cast<size_t>(B), static_cast<int32_t>(ff));
        dev_->upload(arena_, a.all_count.offset, counts.data(), counts.size() * sizeof(int32_t));
    }

    layer_active_.assign(static_cast<size_t>(h.n_layer), 0);
    kv_pos_host_.assign(static_cast<size_t>(options_.n_ctx), -1);
    dev_->upload(arena_, a.kv_pos.offset, kv_pos_host_.data(), kv_pos_host_.size() * sizeof(int32_t));
    pos_host_.resize(static_cast<size_t>(B));
    out_rows_host_.resize(static_cast<size_t>(B));
    counts_host_.resize(static_cast<size_t>(B));
    logits_.resize(static_cast<size_t>(B) * static_cast<size_t>(h.n_vocab));
    logits_row_of_token_.assign(static_cast<size_t>(B), -1);
    if (const offload* off = options_.ffn_offload) {
        if (!m.sparse_inference()) fail(status::invalid_argument, "FFN offloading needs sparse inference");
        if (off->n_layers() != static_cast<size_t>(h.n_layer))
            fail(status::invalid_argument, "the offload plan does not belong to this model");
        const int64_t k = std::max<int32_t>(off->max_hot(), 1);
        dv_ = std::make_unique<device_arena>();
        dv_->mem = off->dev().alloc(layout_device_arena(*dv_, h, B, k));
        for (pib_tensor* t : {&dv_->xn, &dv_->idx, &dv_->count, &dv_->up, &dv_->gate, &dv_->partial})
            place(*t, dv_->mem);
        idx_host_.resize(static_cast<size_t>(B * ff));
        hot_idx_host_.resize(static_cast<size_t>(B * k));
        hot_count_host_.resize(static_cast<size_t>(B));
        partial_host_.resize(static_cast<size_t>(B * d));
        worker_ = std::thread([this] { worker_loop(); });
    }
    if (audit) {
        audits_.resize(static_cast<size_t>(h.n_layer));
        audit_act_host_.resize(static_cast<size_t>(B * ff));
        audit_mark_.resize(static_cast<size_t>(ff));
    }
    if (audit || options_.count_activations) audit_idx_host_.resize(static_cast<size_t>(B * ff));
    if (options_.count_activations && m.sparse_inference())
        activation_counts_.assign(static_cast<size_t>(h.n_layer), std::vector<float>(static_cast<size_t>(ff), 0.0f));
}

uint64_t context::device_scratch_bytes(const hparams& h, int32_t n_batch, int32_t max_hot) {
    device_arena t;
    return layout_device_arena(t, h, n_batch, std::max<int32_t>(max_hot, 1));
}

void context::count_layer(size_t il, int32_t n) {
    const arena_layout& a = *at_;
    std::vector<float>& counts = activation_counts_[il];
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const auto c = static_cast<size_t>(counts_host_[tt]);
        dev_->download(arena_, a.idx.offset + tt * a.idx.nb1, audit_idx_host_.data(), sizeof(int32_t) * c);
        for (size_t j = 0; j < c; ++j) counts[static_cast<size_t>(audit_idx_host_[j])] += 1.0f;
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
    const pib_tensor xn = first_rows(a.xn, n), up = first_rows(a.audit_up, n), gate = first_rows(a.audit_gate, n);
    dv.run("audit FFN up", &pib_vtable::mul_mat, &w.up, &xn, &up);
    dv.run("audit FFN gate", &pib_vtable::mul_mat, &w.gate, &xn, &gate);
    dv.run("audit FFN activation", &pib_vtable::glu, &gate, &up, static_cast<int32_t>(model_.glu()), &up);
    dv.run("synchronize", &pib_vtable::synchronize);
    dv.download(arena_, a.audit_up.offset, audit_act_host_.data(), sizeof(float) * ff * static_cast<size_t>(n));
    dv.download(arena_, a.idx.offset, audit_idx_host_.data(), sizeof(int32_t) * ff * static_cast<size_t>(n));
    predictor_audit& out = audits_[il];
    for (int32_t t = 0; t < n; ++t) {
        std::fill(audit_mark_.begin(), audit_mark_.end(), 0);
        const int32_t count = counts_host_[static_cast<size_t>(t)];
        for (int32_t k = 0; k < count; ++k) audit_mark_[static_cast<size_t>(audit_idx_host_[static_cast<size_t>(t) * ff + static_cast<size_t>(k)])] = 1;
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

void context::worker_loop() {
    for (;;) {
        std::unique_lock lock(worker_mutex_);
        worker_cv_.wait(lock, [this] { return worker_has_job_ || worker_stop_; });
        if (worker_stop_) return;
        lock.unlock();
        std::exception_ptr error;
        try {
            device_half(job_layer_, job_tokens_);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        worker_error_ = error;
        worker_has_job_ = false;
        lock.unlock();
        worker_cv_.notify_all();
    }
}

void context::start_device_half(size_t il, int32_t n) {
    {
        std::lock_guard lock(worker_mutex_);
        job_layer_ = il;
        job_tokens_ = n;
        worker_has_job_ = true;
    }
    worker_cv_.notify_all();
}

void context::wait_device_half() {
    std::unique_lock lock(worker_mutex_);
    worker_cv_.wait(lock, [this] { return !worker_has_job_; });
    if (worker_error_) std::rethrow_exception(std::exchange(worker_error_, nullptr));
}

// The device's share of a hybrid FFN: the active hot neurons of every token, summed into its own
// partial output (spec §4.2: the device holds gathered rows; the CPU adds the two halves).
void context::device_half(size_t il, int32_t n) {
    const offload_layer& l = options_.ffn_offload->layer(il);
    device& dd = options_.ffn_offload->dev();
    const device_arena& a = *dv_;
    const auto k = static_cast<int64_t>(l.hot.size());
    pib_tensor idx = first_rows(a.idx, n), up = first_rows(a.up, n), gate = first_rows(a.gate, n);
    idx.ne0 = up.ne0 = gate.ne0 = k; // rows keep the arena's stride, sized for the largest layer
    pib_tensor count = a.count;
    count.ne0 = n;
    const pib_tensor xn = first_rows(a.xn, n), partial = first_rows(a.partial, n);
    dd.run("device FFN up", &pib_vtable::mul_mat_sparse, &l.up, &xn, &idx, &count, &up);
    dd.run("device FFN gate", &pib_vtable::mul_mat_sparse, &l.gate, &xn, &idx, &count, &gate);
    dd.run("device FFN activation", &pib_vtable::glu, &gate, &up, static_cast<int32_t>(model_.glu()), &up);
    dd.run("clearing the device partial sum", &pib_vtable::buffer_clear, a.mem.get(), partial.offset,
           partial.nb1 * static_cast<size_t>(n));
    dd.run("device FFN down", &pib_vtable::axpy_sparse, &l.down_t, &up, &idx, &count, &partial);
    dd.run("device synchronize", &pib_vtable::synchronize);
}

// Sparse FFN split between the CPU and the offload device: the predictor's lists are divided
// into hot (device) and cold (CPU) neurons, both halves run at once, then the partial sums add.
void context::hybrid_ffn(size_t il, int32_t n) {
    const arena_layout& a = *at_;
    const layer_weights& w = model_.layers()[il];
    const offload_layer& l = options_.ffn_offload->layer(il);
    device& dv = *dev_;
    device& dd = options_.ffn_offload->dev();
    const auto ff = static_cast<size_t>(model_.hp().n_ff);
    const auto d = static_cast<size_t>(model_.hp().n_embd);
    const size_t k_stride = static_cast<size_t>(dv_->idx.ne0);
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), u = first_rows(a.u, n),
                     g = first_rows(a.g, n), idx = first_rows(a.idx, n);
    pib_tensor count = a.count;
    count.ne0 = n;

    bool any_hot = false;
    for (int32_t t = 0; t < n; ++t) {
        const auto tt = static_cast<size_t>(t);
        const int32_t total = counts_host_[tt];
        int32_t* list = idx_host_.data() + tt * ff;
        dv.download(arena_, a.idx.offset + tt * a.idx.nb1, list, sizeof(int32_t) * static_cast<size_t>(total));
        int32_t cold = 0, hot = 0;
        for (int32_t j = 0; j < total; ++j) {
            const int32_t row = l.device_row[static_cast<size_t>(list[j])];
            if (row >= 0) hot_idx_host_[tt * k_stride + static_cast<size_t>(hot++)] = row;
            else list[cold++] = list[j];
        }
        counts_host_[tt] = cold;
        hot_count_host_[tt] = hot;
        any_hot = any_hot || hot > 0;
        dv.upload(arena_, a.idx.offset + tt * a.idx.nb1, list, sizeof(int32_t) * static_cast<size_t>(cold));
    }
    dv.upload(arena_, a.count.offset, counts_host_.data(), sizeof(int32_t) * static_cast<size_t>(n));
    if (any_hot) {
        // Host-visible activations go to the device as bytes; both sides use F32 rows.
        const auto* xn_host = static_cast<const uint8_t*>(dv.vt().buffer_host_ptr(dv.ctx(), arena_.get()));
        if (!xn_host) fail(status::internal, "the CPU arena is not host-visible");
        dd.upload(dv_->mem, dv_->xn.offset, xn_host + a.xn.offset, a.xn.nb1 * static_cast<size_t>(n));
        dd.upload(dv_->mem, dv_->idx.offset, hot_idx_host_.data(), sizeof(int32_t) * k_stride * static_cast<size_t>(n));
        dd.upload(dv_->mem, dv_->count.offset, hot_count_host_.data(), sizeof(int32_t) * static_cast<size_t>(n));
        start_device_half(il, n);
    }
    try {
        dv.run("sparse FFN up (cold)", &pib_vtable::mul_mat_sparse, &w.up, &xn, &idx, &count, &u);
        dv.run("sparse FFN gate (cold)", &pib_vtable::mul_mat_sparse, &w.gate, &xn, &idx, &count, &g);
        dv.run("FFN activation", &pib_vtable::glu, &g, &u, static_cast<int32_t>(model_.glu()), &u);
        dv.run("sparse FFN down (cold)", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count, &x);
    } catch (...) {
        if (any_hot) wait_device_half();
        throw;
    }
    if (!any_hot) return;
    wait_device_half();
    dd.download(dv_->mem, dv_->partial.offset, partial_host_.data(), sizeof(float) * d * static_cast<size_t>(n));
    const pib_tensor tmp = first_rows(a.tmp, n);
    dv.upload(arena_, a.tmp.offset, partial_host_.data(), sizeof(float) * d * static_cast<size_t>(n));
    dv.run("merging the device partial sum", &pib_vtable::add, &x, &tmp, &x);
}

void context::check_cancel() const {
    if (cancel_.load(std::memory_order_relaxed)) fail(status::cancelled, "decoding cancelled");
}

void context::truncate(int32_t pos) {
    if (pos < 0) fail(status::invalid_argument, "truncate position ", pos, " is negative");
    for (int32_t& p : kv_pos_host_)
        if (p >= pos) p = -1;
    dev_->upload(arena_, at_->kv_pos.offset, kv_pos_host_.data(), kv_pos_host_.size() * sizeof(int32_t));
    n_past_ = std::min(n_past_, pos);
}

void context::forget_cells(std::span<const int32_t> positions) {
    for (int32_t p : positions) kv_pos_host_[static_cast<size_t>(p)] = -1;
    dev_->upload(arena_, at_->kv_pos.offset, kv_pos_host_.data(), kv_pos_host_.size() * sizeof(int32_t));
}

void context::decode(const batch_view& batch) {
    const hparams& h = model_.hp();
    const auto n = static_cast<int32_t>(batch.tokens.size());
    if (n <= 0) fail(status::invalid_argument, "the batch is empty");
    if (n > options_.n_batch)
        fail(status::invalid_argument, "the batch has ", n, " tokens, more than n_batch = ", options_.n_batch);
    if (!batch.pos.empty() && batch.pos.size() != batch.tokens.size())
        fail(status::invalid_argument, "the batch has ", batch.pos.size(), " positions for ", n, " tokens");
    if (!batch.logits.empty() && batch.logits.size() != batch.tokens.size())
        fail(status::invalid_argument, "the batch has ", batch.logits.size(), " logits flags for ", n, " tokens");
    for (int32_t i = 0; i < n; ++i) {
        const int32_t t = batch.tokens[static_cast<size_t>(i)];
        if (t < 0 || t >= h.n_vocab)
            fail(status::invalid_argument, "token ", i, " of the batch has id ", t, ", outside the vocabulary [0, ",
                 h.n_vocab, ")");
        const int32_t p = batch.pos.empty() ? n_past_ + i : batch.pos[static_cast<size_t>(i)];
        if (p < 0) fail(status::invalid_argument, "token ", i, " of the batch has negative position ", p);
        if (p >= options_.n_ctx)
            fail(status::context_full, "position ", p, " does not fit in the context (n_ctx = ", options_.n_ctx, ")");
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
        const bool wanted = batch.logits.empty() ? i == n - 1 : batch.logits[static_cast<size_t>(i)] != 0;
        if (!wanted) continue;
        logits_row_of_token_[static_cast<size_t>(i)] = n_outputs_;
        out_rows_host_[static_cast<size_t>(n_outputs_++)] = i;
    }

    const auto start = std::chrono::steady_clock::now();
    const arena_layout& a = *at_;
    dev_->upload(arena_, a.ids.offset, batch.tokens.data(), sizeof(int32_t) * static_cast<size_t>(n));
    dev_->upload(arena_, a.pos.offset, positions.data(), sizeof(int32_t) * static_cast<size_t>(n));
    for (int32_t p : positions) kv_pos_host_[static_cast<size_t>(p)] = p;
    dev_->upload(arena_, a.kv_pos.offset, kv_pos_host_.data(), kv_pos_host_.size() * sizeof(int32_t));
    n_kv_ = 0;
    for (int32_t c = options_.n_ctx - 1; c >= 0 && n_kv_ == 0; --c)
        if (kv_pos_host_[static_cast<size_t>(c)] >= 0) n_kv_ = c + 1;
    try {
        forward(n, std::span<const int32_t>(out_rows_host_.data(), static_cast<size_t>(n_outputs_)));
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
    const hparams& h = model_.hp();
    device& dv = *dev_;
    const pib_tensor x = first_rows(a.x, n);
    pib_tensor ids = a.ids;
    ids.ne0 = n;
    dv.run("token embedding lookup", &pib_vtable::get_rows, &model_.token_embd(), &ids, &x);

    for (size_t il = 0; il < static_cast<size_t>(h.n_layer); ++il) {
        check_cancel();
        attention_block(il, n);
        ffn_block(il, n);
    }
    check_cancel();

    const auto n_out = static_cast<int64_t>(out_rows.size());
    if (n_out == 0) return;
    dv.upload(arena_, a.out_rows.offset, out_rows.data(), out_rows.size() * sizeof(int32_t));
    pib_tensor rows = a.out_rows;
    rows.ne0 = n_out;
    const pib_tensor xo = first_rows(a.xo, n_out), logits = first_rows(a.logits, n_out);
    dv.run("gathering output rows", &pib_vtable::get_rows, &x, &rows, &xo);
    dv.run("output norm", &pib_vtable::rms_norm, &xo, &model_.output_norm(), h.rms_eps, &xo);
    dv.run("output projection", &pib_vtable::mul_mat, &model_.output(), &xo, &logits);
    if (n == 1)
        stats_.decode_bytes += bytes_of(model_.output()) + bytes_of(model_.output_norm()) + model_.token_embd().nb1;
    dv.run("synchronize", &pib_vtable::synchronize);
    dv.download(arena_, a.logits.offset, logits_.data(),
                static_cast<size_t>(n_out) * static_cast<size_t>(h.n_vocab) * sizeof(float));
}

void context::attention_block(size_t il, int32_t n) {
    const arena_layout& a = *at_;
    const hparams& h = model_.hp();
    const layer_weights& w = model_.layers()[il];
    device& dv = *dev_;
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), q = first_rows(a.q, n),
                     k = first_rows(a.k, n), v = first_rows(a.v, n), att = first_rows(a.att, n),
                     tmp = first_rows(a.tmp, n);
    pib_tensor pos = a.pos;
    pos.ne0 = n;

    dv.run("attention norm", &pib_vtable::rms_norm, &x, &w.attn_norm, h.rms_eps, &xn);
    dv.run("Q projection", &pib_vtable::mul_mat, &w.wq, &xn, &q);
    dv.run("K projection", &pib_vtable::mul_mat, &w.wk, &xn, &k);
    dv.run("V projection", &pib_vtable::mul_mat, &w.wv, &xn, &v);
    const pib_rope_params rq{h.n_head, h.head_dim, h.n_rot, h.arch->rope_mode, h.rope_freq_base, h.rope_freq_scale};
    const pib_rope_params rk{h.n_head_kv, h.head_dim, h.n_rot, h.arch->rope_mode, h.rope_freq_base,
                             h.rope_freq_scale};
    dv.run("RoPE of Q", &pib_vtable::rope, &q, &pos, &rq);
    dv.run("RoPE of K", &pib_vtable::rope, &k, &pos, &rk);
    dv.run("storing K", &pib_vtable::set_rows, &k, &pos, &a.k_cache[il]);
    dv.run("storing V", &pib_vtable::set_rows, &v, &pos, &a.v_cache[il]);

    const pib_attention_params ap{h.n_head, h.n_head_kv, h.head_dim, n_kv_,
                                  1.0f / std::sqrt(static_cast<float>(h.head_dim))};
    pib_tensor kv_pos = a.kv_pos;
    kv_pos.ne0 = n_kv_;
    dv.run("attention", &pib_vtable::attention, &q, &a.k_cache[il], &a.v_cache[il], &pos, &kv_pos, &ap, &att);
    dv.run("attention output projection", &pib_vtable::mul_mat, &w.wo, &att, &tmp);
    dv.run("attention residual", &pib_vtable::add, &x, &tmp, &x);
    if (n == 1)
        stats_.decode_bytes += bytes_of(w.attn_norm) + bytes_of(w.wq) + bytes_of(w.wk) + bytes_of(w.wv) +
                               bytes_of(w.wo) + 2 * static_cast<uint64_t>(n_kv_) * a.k_cache[il].nb1;
}

void context::ffn_block(size_t il, int32_t n) {
    const arena_layout& a = *at_;
    const hparams& h = model_.hp();
    const layer_weights& w = model_.layers()[il];
    device& dv = *dev_;
    const pib_tensor x = first_rows(a.x, n), xn = first_rows(a.xn, n), u = first_rows(a.u, n),
                     g = first_rows(a.g, n);
    const int32_t glu = model_.glu();

    dv.run("FFN norm", &pib_vtable::rms_norm, &x, &w.ffn_norm, h.rms_eps, &xn);
    if (model_.sparse_inference()) {
        const pib_tensor z = view(arena_, a.z_offset, ggml_type::f32, w.predictor_rank, n);
        const pib_tensor p = first_rows(a.p, n), idx = first_rows(a.idx, n);
        pib_tensor count = a.count;
        count.ne0 = n;
        // The predictor reads the residual before ffn_norm (spec §3).
        dv.run("predictor fc1", &pib_vtable::mul_mat, &w.fc1, &x, &z);
        dv.run("predictor ReLU", &pib_vtable::relu, &z, &z);
        dv.run("predictor fc2", &pib_vtable::mul_mat, &w.fc2, &z, &p);
        dv.run("selecting active neurons", &pib_vtable::select_active, &p, model_.sparse_threshold(), &idx, &count);
        dv.run("synchronize", &pib_vtable::synchronize);
        dv.download(arena_, a.count.offset, counts_host_.data(), sizeof(int32_t) * static_cast<size_t>(n));
        uint64_t active = 0;
        for (int32_t i = 0; i < n; ++i) active += static_cast<uint64_t>(counts_host_[static_cast<size_t>(i)]);
        if (!audits_.empty()) audit_layer(il, n);
        if (!activation_counts_.empty()) count_layer(il, n);
        if (dv_) {
            hybrid_ffn(il, n);
        } else {
            dv.run("sparse FFN up", &pib_vtable::mul_mat_sparse, &w.up, &xn, &idx, &count, &u);
            dv.run("sparse FFN gate", &pib_vtable::mul_mat_sparse, &w.gate, &xn, &idx, &count, &g);
            dv.run("FFN activation", &pib_vtable::glu, &g, &u, glu, &u);
            dv.run("sparse FFN down", &pib_vtable::axpy_sparse, &w.down_t, &u, &idx, &count, &x);
        }
        stats_.ffn_active_neurons += active;
        layer_active_[il] += active;
        stats_.ffn_total_neurons += static_cast<uint64_t>(n) * static_cast<uint64_t>(h.n_ff);
        if (n == 1)
            stats_.decode_bytes += bytes_of(w.ffn_norm) + bytes_of(w.fc1) + bytes_of(w.fc2) +
                                   active * (w.up.nb1 + w.gate.nb1 + w.down_t.nb1);
        return;
    }
    dv.run("FFN up", &pib_vtable::mul_mat, &w.up, &xn, &u);
    dv.run("FFN gate", &pib_vtable::mul_mat, &w.gate, &xn, &g);
    dv.run("FFN activation", &pib_vtable::glu, &g, &u, glu, &u);
    if (model_.sparse_file()) {
        // Forced dense mode on a sparse file: the down projection runs over every row of ffn_down_t.
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
    if (n == 1)
        stats_.decode_bytes += bytes_of(w.ffn_norm) + bytes_of(w.up) + bytes_of(w.gate) +
                               (model_.sparse_file() ? bytes_of(w.down_t) : bytes_of(w.down));
}

std::span<const float> context::logits(int32_t i) const noexcept {
    const auto nv = static_cast<size_t>(model_.hp().n_vocab);
    int32_t row = -1;
    if (i == -1) row = n_outputs_ - 1;
    else if (i >= 0 && static_cast<size_t>(i) < logits_row_of_token_.size()) row = logits_row_of_token_[static_cast<size_t>(i)];
    if (row < 0) return {};
    return std::span<const float>(logits_.data() + static_cast<size_t>(row) * nv, nv);
}

} // namespace pi
