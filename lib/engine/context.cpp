#include "engine/context.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "engine/block_ops.hpp"
#include "engine/device_half.hpp"
#include "engine/graph_session.hpp"
#include "engine/offload.hpp"

namespace pi {

namespace {

context_options validated(const model& m, context_options o) {
    if (o.n_ctx <= 0) fail(status::invalid_argument, "n_ctx must be positive (got ", o.n_ctx, ")");
    if (o.n_ctx > (1 << 22)) fail(status::invalid_argument, "n_ctx ", o.n_ctx, " is too large");
    if (o.n_seq_max < 1 || o.n_seq_max > 64)
        fail(status::invalid_argument, "n_seq_max must be in [1, 64] (got ", o.n_seq_max, ")");
    if (o.n_batch <= 0)
        fail(status::invalid_argument, "n_batch must be positive (got ", o.n_batch, ")");
    if (o.n_threads <= 0)
        fail(status::invalid_argument, "n_threads must be at least 1 (got ", o.n_threads, ")");
    if (o.n_threads > 1024) fail(status::invalid_argument, "n_threads ", o.n_threads, " is absurd");
    o.n_batch = std::min(o.n_batch, o.n_ctx);
    const arch_desc& arch = *m.hp().arch;
    if (m.hp().n_positions > 0 && o.n_ctx > m.hp().n_positions)
        fail(status::invalid_argument, "n_ctx ", o.n_ctx, " is beyond the ", m.hp().n_positions,
             " positions this ", arch.name, " model has learned");
    if (const offload* off = o.offloaded) {
        if (!offload_capable(arch))
            fail(status::unsupported, "offloading ", arch.name,
                 " layers to a device is not supported yet; run this model on the CPU");
        if (!m.sparse_inference())
            fail(status::invalid_argument, "offloading needs sparse inference");
        if (off->n_layers() != static_cast<size_t>(m.hp().n_layer))
            fail(status::invalid_argument, "the offload plan does not belong to this model");
        o.n_batch = std::min(o.n_batch, max_offload_batch);
    }
    o.audit_predictor = o.audit_predictor && m.sparse_inference();
    o.count_activations = o.count_activations && m.sparse_inference();
    return o;
}

arena_spec host_arena_spec(const context_options& o) {
    return arena_spec{o.n_batch, true, o.audit_predictor, 0, o.n_batch};
}

// The offload device whose page-locked memory holds the host arena, when it has any.
device* pinning_device(const context_options& o) {
    return o.offloaded && o.offloaded->dev().has_host_alloc() ? &o.offloaded->dev() : nullptr;
}

} // namespace

context::context(const model& m, const context_options& options)
    : model_(m), options_(validated(m, options)),
      cpu_(std::make_unique<device>(device::cpu(options_.n_threads))),
      host_(*cpu_, m, host_arena_spec(options_), pinning_device(options_)),
      kv_(*cpu_, options_.offloaded, m.hp(), options_.n_ctx, options_.n_seq_max, options_.kv_f16),
      counters_(m, options_.n_batch, options_.audit_predictor, options_.count_activations) {
    if (!host_.host_data()) fail(status::internal, "the CPU arena is not host-visible");
    const auto B = static_cast<size_t>(options_.n_batch);
    const arena_tensors& a = host_.tensors();
    if (m.sparse_file() && !m.sparse_inference()) {
        // Forced dense mode over ffn_down_t: every token lists every neuron.
        std::vector<int32_t> every_neuron(static_cast<size_t>(m.hp().n_ff));
        std::iota(every_neuron.begin(), every_neuron.end(), 0);
        for (size_t r = 0; r < B; ++r)
            cpu_->upload(host_.memory(), a.all_idx.offset + a.all_idx.nb1 * r, every_neuron.data(),
                         every_neuron.size() * sizeof(int32_t));
        const std::vector<int32_t> counts(B, m.hp().n_ff);
        cpu_->upload(host_.memory(), a.all_count.offset, counts.data(),
                     counts.size() * sizeof(int32_t));
    }
    batch_pos_.resize(B);
    if (m.hp().arch->learned_positions) position_rows_.resize(B);
    batch_seq_.resize(B);
    batch_cells_.resize(B);
    batch_pairs_.resize(B);
    next_pos_.resize(static_cast<size_t>(options_.n_seq_max));
    out_rows_.resize(B);
    active_counts_.resize(B);
    pending_ffn_.reserve(static_cast<size_t>(m.hp().n_layer));
    logits_.resize(B * static_cast<size_t>(m.hp().n_vocab));
    logits_row_of_token_.assign(B, -1);
    if (options_.offloaded)
        offload_half_ =
            std::make_unique<device_half>(m, *options_.offloaded, *cpu_, host_, options_.n_batch);
}

context::~context() = default;

void context::check_cancel() const {
    if (cancel_.load(std::memory_order_relaxed)) fail(status::cancelled, "decoding cancelled");
}

const offload_layer* context::offloaded_layer(size_t il) const noexcept {
    return options_.offloaded ? &options_.offloaded->layer(il) : nullptr;
}

void context::x_to_host(int32_t n) {
    if (offload_half_) offload_half_->x_to_host(n);
}

void context::x_to_device(int32_t n) {
    offload_half_->x_to_device(n);
}

void context::truncate(int32_t pos) {
    if (pos < 0) fail(status::invalid_argument, "truncate position ", pos, " is negative");
    kv_.remove(-1, pos, -1);
}

void context::prepare_batch(const batch_view& batch) {
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
    if (!batch.seqs.empty() && batch.seqs.size() != batch.tokens.size())
        fail(status::invalid_argument, "the batch has ", batch.seqs.size(), " sequence ids for ", n,
             " tokens");
    std::fill(next_pos_.begin(), next_pos_.end(), -1);
    for (int32_t i = 0; i < n; ++i) {
        const auto at = static_cast<size_t>(i);
        const int32_t t = batch.tokens[at];
        if (t < 0 || t >= model_.hp().n_vocab)
            fail(status::invalid_argument, "token ", i, " of the batch has id ", t,
                 ", outside the vocabulary [0, ", model_.hp().n_vocab, ")");
        const int32_t s = batch.seqs.empty() ? batch.seq : batch.seqs[at];
        if (s < 0 || s >= options_.n_seq_max)
            fail(status::invalid_argument, "token ", i, " of the batch has sequence id ", s,
                 ", outside [0, ", options_.n_seq_max, ") (n_seq_max = ", options_.n_seq_max, ")");
        int32_t& next = next_pos_[static_cast<size_t>(s)];
        // A loaded state may hold any position a cell can; the one after INT32_MAX is refused
        // below as beyond the context rather than overflowing.
        if (next < 0)
            next = static_cast<int32_t>(std::min<int64_t>(int64_t{kv_.pos_max(s)} + 1, INT32_MAX));
        const int32_t p = batch.pos.empty() ? next : batch.pos[at];
        if (p < 0)
            fail(status::invalid_argument, "token ", i, " of the batch has negative position ", p);
        if (model_.hp().n_positions > 0 && p >= model_.hp().n_positions)
            fail(status::context_full, "position ", p, " is beyond the ", model_.hp().n_positions,
                 " positions the model has learned");
        if (p >= options_.n_ctx)
            fail(status::context_full, "position ", p,
                 " does not fit in the context (n_ctx = ", options_.n_ctx, ")");
        next = std::max(next, p + 1);
        batch_seq_[at] = s;
        batch_pos_[at] = p;
    }
    {
        const auto pairs = std::span(batch_pairs_).first(static_cast<size_t>(n));
        for (size_t i = 0; i < pairs.size(); ++i)
            pairs[i] = (static_cast<int64_t>(batch_seq_[i]) << 32) | batch_pos_[i];
        std::sort(pairs.begin(), pairs.end());
        if (std::adjacent_find(pairs.begin(), pairs.end()) != pairs.end())
            fail(status::invalid_argument,
                 "the batch holds two tokens at the same position of a sequence");
    }

    n_outputs_ = 0;
    std::fill(logits_row_of_token_.begin(), logits_row_of_token_.end(), -1);
    for (int32_t i = 0; i < n; ++i) {
        const auto at = static_cast<size_t>(i);
        bool wanted = i == n - 1;
        if (!batch.logits.empty()) {
            wanted = batch.logits[at] != 0;
        } else if (batch.last_of_each_sequence) {
            wanted = std::find(batch_seq_.begin() + i + 1, batch_seq_.begin() + n,
                               batch_seq_[at]) == batch_seq_.begin() + n;
        }
        if (!wanted) continue;
        logits_row_of_token_[at] = n_outputs_;
        out_rows_[static_cast<size_t>(n_outputs_++)] = i;
    }
}

void context::decode(const batch_view& batch) {
    prepare_batch(batch);
    const auto turn = turn_on(options_.offloaded);
    const auto n = static_cast<int32_t>(batch.tokens.size());
    const std::span<const int32_t> positions(batch_pos_.data(), static_cast<size_t>(n));

    const auto start = std::chrono::steady_clock::now();
    take_link_tally(); // state edits between batches are no batch's
    const arena_tensors& a = host_.tensors();
    cpu_->upload(host_.memory(), a.ids.offset, batch.tokens.data(), batch.tokens.size_bytes());
    const std::span<int32_t> cells(batch_cells_.data(), static_cast<size_t>(n));
    kv_.place(std::span<const int32_t>(batch_seq_.data(), static_cast<size_t>(n)), positions,
              batch.tokens, cells);
    cpu_->upload(host_.memory(), a.pos.offset, positions.data(), positions.size_bytes());
    cpu_->upload(host_.memory(), a.cells.offset, cells.data(), cells.size_bytes());
    try {
        const std::span<const int32_t> out_rows(out_rows_.data(), static_cast<size_t>(n_outputs_));
        if (offload_half_) offload_half_->upload_batch(positions, cells, out_rows);
        graph_session graphs(graph_device(n));
        forward(n, out_rows);
        const auto [kernels, launches] = graphs.end();
        counters_.add_graphs(n, kernels, launches);
    } catch (...) {
        take_link_tally();
        kv_.forget(cells);
        n_outputs_ = 0;
        std::fill(logits_row_of_token_.begin(), logits_row_of_token_.end(), -1);
        throw;
    }
    counters_.add_link(n, take_link_tally());
    counters_.add_batch(
        n, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Batches of up to graph_max_tokens tokens (decoding, one or a few sequences) cost little
// device time per kernel, so launching is what a graph saves; a prompt's products are long
// enough that launching them one by one costs nothing that shows.
device* context::graph_device(int32_t n) const noexcept {
    constexpr int32_t graph_max_tokens = 16;
    if (!offload_half_ || n > graph_max_tokens || !offload_half_->dev().has_graphs())
        return nullptr;
    return &offload_half_->dev();
}

link_tally context::take_link_tally() noexcept {
    link_tally t = kv_.take_device_tally();
    if (offload_half_) t.add(offload_half_->take_tally());
    return t;
}

void context::forward(int32_t n, std::span<const int32_t> out_rows) {
    const arena_tensors& a = host_.tensors();
    const pib_tensor x = first_rows(a.x, n);
    pib_tensor ids = a.ids;
    ids.ne0 = n;
    cpu_->run("token embedding lookup", &pib_vtable::get_rows, &model_.token_embd(), &ids, &x);
    if (offload_half_) offload_half_->start_batch();
    pending_ffn_.clear();

    if (model_.hp().arch->learned_positions) add_positions(n);
    const bool parallel = model_.hp().arch->block == block_kind::parallel;
    for (size_t il = 0; il < static_cast<size_t>(model_.hp().n_layer); ++il) {
        check_cancel();
        if (parallel) {
            // Both halves read the layer input: the FFN (which adds into x) runs first, the
            // attention from the norms it leaves behind.
            parallel_norms(il, n);
            ffn_block(il, n);
            attention_block(il, n);
        } else {
            attention_block(il, n);
            ffn_block(il, n);
        }
    }
    check_cancel();
    output_block(n, out_rows);
    settle_device_counts(n);
}

// OPT: h += position_embd[pos + 2] (its table keeps Hugging Face's two offset rows).
void context::add_positions(int32_t n) {
    const arena_tensors& a = host_.tensors();
    const auto rows = std::span(position_rows_).first(static_cast<size_t>(n));
    for (size_t i = 0; i < rows.size(); ++i)
        rows[i] = batch_pos_[i] + 2;
    cpu_->upload(host_.memory(), a.position_rows.offset, rows.data(), rows.size_bytes());
    pib_tensor ids = a.position_rows;
    ids.ne0 = n;
    const pib_tensor x = first_rows(a.x, n), tmp = first_rows(a.tmp, n);
    cpu_->run("position embedding lookup", &pib_vtable::get_rows, &model_.position_embd(), &ids,
              &tmp);
    cpu_->run("adding positions", &pib_vtable::add, &x, &tmp, &x);
}

void context::output_block(int32_t n, std::span<const int32_t> out_rows) {
    const hparams& h = model_.hp();
    if (out_rows.empty()) return;
    const offload* off = options_.offloaded;
    const bool on_device = off && off->has_output();
    device& dev = on_device ? off->dev() : *cpu_;
    const arena_tensors& a = on_device ? offload_half_->tensors() : host_.tensors();
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
        pib_tensor rows = a.out_rows;
        rows.ne0 = static_cast<int64_t>(now);
        if (on_device) // all of the batch's output rows came up with its inputs (upload_batch)
            rows.offset += done * sizeof(int32_t);
        else
            dev.run("uploading output rows", &pib_vtable::buffer_upload, a.mem, a.out_rows.offset,
                    out_rows.data() + done, now * sizeof(int32_t));
        const pib_tensor xo = first_rows(a.xo, rows.ne0), logits = first_rows(a.logits, rows.ne0);
        dev.run("gathering output rows", &pib_vtable::get_rows, &x, &rows, &xo);
        apply_norm(dev, "output norm", h, xo, norm, model_.output_norm_bias(), xo);
        dev.run("output projection", &pib_vtable::mul_mat, &out, &xo, &logits);
        float* dst = logits_.data() + done * vocab;
        if (on_device) {
            offload_half_->download(a.logits.offset, dst, now * vocab * sizeof(float));
        } else {
            dev.run("synchronize", &pib_vtable::synchronize);
            dev.run("downloading logits", &pib_vtable::buffer_download, a.mem, a.logits.offset, dst,
                    now * vocab * sizeof(float));
        }
        done += now;
    }
    if (n == 1)
        counters_.add_decode_bytes(bytes_of(model_.output()) + bytes_of(model_.output_norm()) +
                                   model_.token_embd().nb1);
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
