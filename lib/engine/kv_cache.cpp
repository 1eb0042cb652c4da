#include "engine/kv_cache.hpp"

#include <algorithm>
#include <bit>
#include <map>

#include "engine/arena.hpp"
#include "engine/offload.hpp"
#include "support/log.hpp"

namespace pi {

namespace {

constexpr size_t host_cache_alignment = 64;
// Cells a cache edit moves through the scratch rows at once.
constexpr int32_t edit_chunk = 64;

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

uint64_t bit(int32_t seq) noexcept {
    return uint64_t{1} << seq;
}

int32_t end_of(int32_t p1) noexcept {
    return p1 < 0 ? INT32_MAX : p1;
}

pib_tensor rows_of(pib_tensor t, int64_t n) noexcept {
    t.ne1 = n;
    return t;
}

pib_tensor prefix_of(pib_tensor t, int64_t n) noexcept {
    t.ne0 = n;
    return t;
}

// Runs of consecutive cell indices in an ascending list: (first cell, count, index in list).
struct cell_run {
    int32_t first, count;
    size_t at;
};
std::vector<cell_run> runs_of(std::span<const int32_t> ascending) {
    std::vector<cell_run> runs;
    for (size_t i = 0; i < ascending.size(); ++i) {
        if (!runs.empty() && runs.back().first + runs.back().count == ascending[i])
            ++runs.back().count;
        else
            runs.push_back({ascending[i], 1, i});
    }
    return runs;
}

const char* type_name(uint32_t type) noexcept {
    const char* name = traits_of(type).name;
    return name ? name : "unknown";
}

} // namespace

uint64_t kv_cache::device_layer_bytes(const hparams& h, int32_t n_ctx) {
    layout_builder lb(device_tensor_alignment);
    lb.add(ggml_type::f16, h.n_embd_kv(), n_ctx);
    lb.add(ggml_type::f16, h.n_embd_kv(), n_ctx);
    lb.add(ggml_type::i32, n_ctx, 1);
    return lb.size();
}

kv_cache::kv_cache(device& host, const offload* off, const hparams& h, int32_t n_ctx, int32_t n_seq,
                   bool f16)
    : host_(host), device_(cache_on_device(off, n_ctx, f16) ? &off->dev() : nullptr),
      offload_(device_ ? off : nullptr), h_(h), host_type_(f16 ? ggml_type::f16 : ggml_type::f32),
      row_elements_(h.n_embd_kv()), n_seq_(n_seq),
      on_device_(static_cast<size_t>(h.n_layer), false), layers_(static_cast<size_t>(h.n_layer)),
      cells_(static_cast<size_t>(n_ctx)),
      views_(static_cast<size_t>(n_seq) * static_cast<size_t>(n_ctx), -1) {
    if (n_seq < 1 || n_seq > 64)
        fail(status::invalid_argument, "n_seq_max must be in [1, 64] (got ", n_seq, ")");
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
    host_views_ = host_layout.add(ggml_type::i32, n_ctx, n_seq);
    host_memory_ = host.alloc(host_layout.size());
    host_views_.buffer = host_memory_.get();
    if (device_) {
        device_views_ = device_layout.add(ggml_type::i32, n_ctx, n_seq);
        device_memory_ = device_->alloc(device_layout.size());
        device_views_.buffer = device_memory_.get();
    }
    for (size_t il = 0; il < layers_.size(); ++il) {
        pib_buffer* memory = on_device_[il] ? device_memory_.get() : host_memory_.get();
        layers_[il].k.buffer = layers_[il].v.buffer = memory;
    }
    const auto make_scratch = [&](device& dev, size_t alignment) {
        layout_builder lb(alignment);
        scratch s;
        s.rows = lb.add(ggml_type::f32, row_elements_, edit_chunk);
        s.cells = lb.add(ggml_type::i32, edit_chunk, 1);
        s.values = lb.add(ggml_type::i32, edit_chunk, 1);
        s.memory = dev.alloc(lb.size());
        for (pib_tensor* t : {&s.rows, &s.cells, &s.values})
            t->buffer = s.memory.get();
        return s;
    };
    host_scratch_ = make_scratch(host, host_cache_alignment);
    if (device_) device_scratch_ = make_scratch(*device_, device_tensor_alignment);
    mark_all_changed();
    publish();
}

uint64_t kv_cache::bytes_read_per_layer() const noexcept {
    return 2 * static_cast<uint64_t>(span_) * row_bytes(host_type_, row_elements_);
}

void kv_cache::check_seq(int32_t seq, const char* what) const {
    if (seq < 0 || seq >= n_seq_)
        fail(status::invalid_argument, what, " ", seq, " is outside [0, ", n_seq_,
             ") (n_seq_max = ", n_seq_, ")");
}

bool kv_cache::in_range(const cell& c, int32_t seq, int32_t p0, int32_t p1) const noexcept {
    return (c.seqs & bit(seq)) != 0 && c.pos >= p0 && c.pos < end_of(p1);
}

void kv_cache::free_if_empty(cell& c) noexcept {
    if (c.seqs == 0) c = cell{};
}

int32_t kv_cache::cell_of(int32_t seq, int32_t pos) const noexcept {
    for (size_t c = 0; c < cells_.size(); ++c)
        if (cells_[c].pos == pos && (cells_[c].seqs & bit(seq)) != 0)
            return static_cast<int32_t>(c);
    return -1;
}

void kv_cache::place(std::span<const int32_t> seqs, std::span<const int32_t> positions,
                     std::span<const int32_t> tokens, std::span<int32_t> out) {
    const size_t n = positions.size();
    // First count, so that a batch that does not fit changes nothing: a token needs a free cell
    // unless its sequence alone holds its position.
    size_t needed = 0;
    for (size_t i = 0; i < n; ++i) {
        const int32_t c = cell_of(seqs[i], positions[i]);
        needed += c < 0 || cells_[static_cast<size_t>(c)].seqs != bit(seqs[i]);
    }
    const size_t free_cells = cells_.size() - static_cast<size_t>(used_cells());
    if (needed > free_cells)
        fail(status::context_full, "the KV cache has no free cell for ", needed - free_cells,
             " of the batch's ", n, " tokens (n_ctx = ", cells_.size(), " cells, ",
             cells_.size() - free_cells, " in use)");
    size_t next_free = 0;
    for (size_t i = 0; i < n; ++i) {
        const int32_t s = seqs[i];
        const int32_t held = cell_of(s, positions[i]);
        if (held >= 0 && cells_[static_cast<size_t>(held)].seqs == bit(s)) {
            out[i] = held;
        } else {
            if (held >= 0) cells_[static_cast<size_t>(held)].seqs &= ~bit(s); // shared: leave it
            while (cells_[next_free].pos >= 0)
                ++next_free;
            out[i] = static_cast<int32_t>(next_free);
        }
        cells_[static_cast<size_t>(out[i])] = cell{positions[i], tokens[i], bit(s)};
        changed_ |= bit(s);
    }
    publish();
}

void kv_cache::forget(std::span<const int32_t> cells) {
    for (int32_t c : cells) {
        changed_ |= cells_[static_cast<size_t>(c)].seqs;
        cells_[static_cast<size_t>(c)] = cell{};
    }
    publish();
}

void kv_cache::remove(int32_t seq, int32_t p0, int32_t p1) {
    if (seq != -1) check_seq(seq, "sequence");
    const uint64_t which = seq == -1 ? ~uint64_t{0} : bit(seq);
    for (cell& c : cells_) {
        if (c.pos < std::max(p0, 0) || c.pos >= end_of(p1) || (c.seqs & which) == 0) continue;
        changed_ |= c.seqs & which;
        c.seqs &= ~which;
        free_if_empty(c);
    }
    publish();
}

void kv_cache::copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    check_seq(src, "source sequence");
    check_seq(dst, "destination sequence");
    if (src == dst) return;
    remove(dst, p0, p1);
    for (cell& c : cells_)
        if (in_range(c, src, std::max(p0, 0), p1)) c.seqs |= bit(dst);
    changed_ |= bit(dst);
    publish();
}

void kv_cache::keep(int32_t seq) {
    check_seq(seq, "sequence");
    for (cell& c : cells_) {
        c.seqs &= bit(seq);
        free_if_empty(c);
    }
    mark_all_changed();
    publish();
}

void kv_cache::shift(int32_t seq, int32_t p0, int32_t p1, int32_t delta) {
    check_seq(seq, "sequence");
    p0 = std::max(p0, 0);
    if (delta == 0) return;
    std::vector<int32_t> moved, shared;
    size_t free_cells = 0;
    for (size_t c = 0; c < cells_.size(); ++c) {
        const cell& x = cells_[c];
        if (x.pos < 0) ++free_cells;
        if (!in_range(x, seq, p0, p1)) continue;
        if (static_cast<int64_t>(x.pos) + delta > INT32_MAX - 1)
            fail(status::invalid_argument, "shifting position ", x.pos, " by ", delta,
                 " overflows");
        if (x.pos + delta < 0) continue;
        moved.push_back(static_cast<int32_t>(c));
        if (x.seqs != bit(seq)) shared.push_back(static_cast<int32_t>(c));
    }
    for (const cell& x : cells_)
        if ((x.seqs & bit(seq)) != 0 && !in_range(x, seq, p0, p1))
            for (int32_t c : moved)
                if (cells_[static_cast<size_t>(c)].pos + delta == x.pos)
                    fail(status::invalid_argument, "shifting sequence ", seq, " by ", delta,
                         " would put two of its tokens at position ", x.pos);
    if (shared.size() > free_cells)
        fail(status::context_full, "shifting sequence ", seq, " needs ", shared.size(),
             " free cells to unshare its copied tokens; ", free_cells, " are free");

    // Unshare: the shifted sequence gets its own copy of cells that other sequences keep.
    std::vector<int32_t> copies;
    size_t next_free = 0;
    for (int32_t c : shared) {
        while (cells_[next_free].pos >= 0)
            ++next_free;
        cells_[next_free] = cell{cells_[static_cast<size_t>(c)].pos,
                                 cells_[static_cast<size_t>(c)].token, bit(seq)};
        cells_[static_cast<size_t>(c)].seqs &= ~bit(seq);
        copies.push_back(static_cast<int32_t>(next_free));
        std::replace(moved.begin(), moved.end(), c, static_cast<int32_t>(next_free));
    }
    copy_rows(shared, copies);
    for (cell& x : cells_)
        if (in_range(x, seq, p0, p1) && x.pos + delta < 0) {
            x.seqs &= ~bit(seq);
            free_if_empty(x);
        }
    for (int32_t c : moved)
        cells_[static_cast<size_t>(c)].pos += delta;
    std::sort(moved.begin(), moved.end());
    rotate_keys(moved, std::vector<int32_t>(moved.size(), delta));
    changed_ |= ~uint64_t{0};
    publish();
}

template <typename F>
void kv_cache::in_chunks(std::span<const int32_t> cells, std::span<const int32_t> values, F&& f) {
    const auto turn = turn_on(offload_);
    for (size_t at = 0; at < cells.size(); at += edit_chunk) {
        const auto n = static_cast<int64_t>(std::min<size_t>(edit_chunk, cells.size() - at));
        const auto chunk = [&](device& dev, const scratch& s, bool device_layers) {
            const size_t bytes = static_cast<size_t>(n) * sizeof(int32_t);
            dev.upload(s.memory, s.cells.offset, cells.data() + at, bytes);
            dev.upload(s.memory, s.values.offset, values.data() + at, bytes);
            if (device_layers) {
                device_tally_.count_upload(bytes);
                device_tally_.count_upload(bytes);
            }
            const scratch_view v{rows_of(s.rows, n), prefix_of(s.cells, n), prefix_of(s.values, n)};
            for (size_t il = 0; il < layers_.size(); ++il)
                if (on_device_[il] == device_layers) f(dev, v, layers_[il]);
            dev.run("synchronize", &pib_vtable::synchronize);
        };
        chunk(host_, host_scratch_, false);
        if (device_) chunk(*device_, device_scratch_, true);
    }
}

void kv_cache::copy_rows(std::span<const int32_t> from, std::span<const int32_t> to) {
    in_chunks(from, to, [](device& dev, const scratch_view& v, const layer_cells& layer) {
        for (const pib_tensor* t : {&layer.k, &layer.v}) {
            dev.run("reading cached rows", &pib_vtable::get_rows, t, &v.cells, &v.rows);
            dev.run("writing cached rows", &pib_vtable::set_rows, &v.rows, &v.values, t);
        }
    });
}

void kv_cache::rotate_keys(std::span<const int32_t> cells, std::span<const int32_t> deltas) {
    // Without RoPE (OPT) a cached key does not depend on its position: moving it is relabelling.
    if (!h_.arch->uses_rope) return;
    const pib_rope_params rope{h_.n_head_kv,       h_.head_dim,       h_.n_rot,
                               h_.arch->rope_mode, h_.rope_freq_base, h_.rope_freq_scale};
    in_chunks(cells, deltas, [&](device& dev, const scratch_view& v, const layer_cells& layer) {
        // Rotations compose: rotating a key cached at p by delta gives the key at p + delta.
        dev.run("reading cached keys", &pib_vtable::get_rows, &layer.k, &v.cells, &v.rows);
        dev.run("re-rotating cached keys", &pib_vtable::rope, &v.rows, &v.values, &rope);
        dev.run("writing cached keys", &pib_vtable::set_rows, &v.rows, &v.cells, &layer.k);
    });
}

int32_t kv_cache::pos_min(int32_t seq) const {
    check_seq(seq, "sequence");
    int32_t lowest = -1;
    for (const cell& c : cells_)
        if ((c.seqs & bit(seq)) != 0 && (lowest < 0 || c.pos < lowest)) lowest = c.pos;
    return lowest;
}

int32_t kv_cache::pos_max(int32_t seq) const {
    check_seq(seq, "sequence");
    int32_t highest = -1;
    for (const cell& c : cells_)
        if ((c.seqs & bit(seq)) != 0) highest = std::max(highest, c.pos);
    return highest;
}

int32_t kv_cache::used_cells() const noexcept {
    return static_cast<int32_t>(
        std::count_if(cells_.begin(), cells_.end(), [](const cell& c) { return c.pos >= 0; }));
}

std::vector<int32_t> kv_cache::leading_tokens(int32_t seq) const {
    const int32_t highest = pos_max(seq);
    std::vector<int32_t> by_pos(static_cast<size_t>(highest + 1), -1);
    for (const cell& c : cells_)
        if ((c.seqs & bit(seq)) != 0) by_pos[static_cast<size_t>(c.pos)] = c.token;
    const auto gap = std::find(by_pos.begin(), by_pos.end(), -1);
    by_pos.erase(gap, by_pos.end());
    return by_pos;
}

void kv_cache::publish() {
    const auto turn = turn_on(offload_);
    span_ = 0;
    for (auto c = static_cast<int32_t>(cells_.size()) - 1; c >= 0 && span_ == 0; --c)
        if (cells_[static_cast<size_t>(c)].pos >= 0) span_ = c + 1;
    const size_t row = cells_.size();
    publish_row_.resize(row);
    try {
        for (int32_t s = 0; s < n_seq_; ++s) {
            if ((changed_ & bit(s)) == 0) continue;
            int32_t* view = views_.data() + static_cast<size_t>(s) * row;
            for (size_t c = 0; c < row; ++c)
                publish_row_[c] = (cells_[c].seqs & bit(s)) != 0 ? cells_[c].pos : -1;
            // Only the cells whose view changed cross: one for a decoded token.
            size_t lo = 0, hi = row;
            if (!publish_all_) {
                while (lo < hi && publish_row_[lo] == view[lo])
                    ++lo;
                while (hi > lo && publish_row_[hi - 1] == view[hi - 1])
                    --hi;
            }
            if (lo == hi) continue;
            const size_t offset = (static_cast<size_t>(s) * row + lo) * sizeof(int32_t);
            const size_t bytes = (hi - lo) * sizeof(int32_t);
            host_.upload(host_memory_, host_views_.offset + offset, publish_row_.data() + lo,
                         bytes);
            if (device_) {
                device_->upload(device_memory_, device_views_.offset + offset,
                                publish_row_.data() + lo, bytes);
                device_tally_.count_upload(bytes);
            }
            std::copy(publish_row_.begin() + static_cast<std::ptrdiff_t>(lo),
                      publish_row_.begin() + static_cast<std::ptrdiff_t>(hi), view + lo);
        }
    } catch (...) {
        publish_all_ = true; // a buffer may hold part of the new views
        mark_all_changed();
        throw;
    }
    changed_ = 0;
    publish_all_ = false;
}

size_t kv_cache::cell_row_bytes(size_t il) const noexcept {
    return layers_[il].k.nb1;
}

void kv_cache::save(int32_t seq, byte_writer& out) const {
    if (seq != -1) check_seq(seq, "sequence");
    const auto turn = turn_on(offload_);
    std::vector<int32_t> saved;
    for (size_t c = 0; c < cells_.size(); ++c)
        if (cells_[c].pos >= 0 && (seq == -1 || (cells_[c].seqs & bit(seq)) != 0))
            saved.push_back(static_cast<int32_t>(c));
    out.put(static_cast<uint32_t>(layers_.size()));
    out.put(static_cast<int64_t>(row_elements_));
    for (const layer_cells& l : layers_)
        out.put(l.k.type);
    out.put(static_cast<int32_t>(seq == -1 ? n_seq_ : 1));
    out.put(static_cast<uint32_t>(saved.size()));
    for (int32_t c : saved) {
        const cell& x = cells_[static_cast<size_t>(c)];
        out.put(c);
        out.put(x.pos);
        out.put(x.token);
        out.put(seq == -1 ? x.seqs : uint64_t{1});
    }
    const std::vector<cell_run> runs = runs_of(saved);
    std::vector<uint8_t> rows;
    for (size_t il = 0; il < layers_.size(); ++il) {
        device& dev = device_of(il);
        const buffer& memory = memory_of(il);
        const size_t row = cell_row_bytes(il);
        rows.resize(saved.size() * row);
        for (const pib_tensor* t : {&layers_[il].k, &layers_[il].v}) {
            for (const cell_run& r : runs)
                dev.download(memory, t->offset + static_cast<size_t>(r.first) * row,
                             rows.data() + r.at * row, static_cast<size_t>(r.count) * row);
            out.bytes(rows.data(), rows.size());
        }
    }
}

void kv_cache::load(int32_t seq, byte_reader& in) {
    if (seq != -1) check_seq(seq, "sequence");
    const auto turn = turn_on(offload_);
    const auto n_layer = in.get<uint32_t>("the layer count");
    const auto row_elements = in.get<int64_t>("the KV row size");
    if (n_layer != layers_.size() || row_elements != row_elements_)
        fail(status::format, "the state holds a KV cache of ", n_layer, " layers of ", row_elements,
             " values a row; this context's has ", layers_.size(), " of ", row_elements_);
    for (size_t il = 0; il < layers_.size(); ++il) {
        const auto type = in.get<uint32_t>("a layer's KV type");
        if (type != layers_[il].k.type)
            fail(status::format, "layer ", il, " of the state caches ", type_name(type),
                 " values; this context caches ", type_name(layers_[il].k.type));
    }
    const auto blob_seqs = in.get<int32_t>("the sequence count");
    if (blob_seqs < 1 || blob_seqs > 64)
        fail(status::format, "the state claims ", blob_seqs, " sequences");
    if (seq != -1 && blob_seqs != 1)
        fail(status::invalid_argument,
             "the state holds every sequence; load it with sequence -1, not ", seq);
    if (seq == -1 && blob_seqs > n_seq_)
        fail(status::context_full, "the state holds ", blob_seqs,
             " sequences; this context has n_seq_max = ", n_seq_);
    const auto n_cells = in.get<uint32_t>("the cell count");
    if (n_cells > cells_.size())
        fail(status::context_full, "the state holds ", n_cells, " cells; this context has ",
             cells_.size());
    std::vector<int32_t> index(n_cells);
    std::vector<cell> loaded(n_cells);
    std::map<std::pair<int32_t, int32_t>, bool> pairs;
    for (uint32_t i = 0; i < n_cells; ++i) {
        index[i] = in.get<int32_t>("a cell index");
        cell& c = loaded[i];
        c.pos = in.get<int32_t>("a cell position");
        c.token = in.get<int32_t>("a cell token");
        c.seqs = in.get<uint64_t>("a cell's sequences");
        if (c.pos < 0 || c.token < 0 || c.token >= h_.n_vocab || c.seqs == 0 ||
            (blob_seqs < 64 && (c.seqs >> blob_seqs) != 0))
            fail(status::format, "cell ", i, " of the state is invalid (position ", c.pos,
                 ", token ", c.token, ")");
        for (int32_t s = 0; s < blob_seqs; ++s)
            if ((c.seqs & bit(s)) != 0 && !pairs.emplace(std::pair{s, c.pos}, true).second)
                fail(status::format, "the state holds position ", c.pos, " of sequence ", s,
                     " twice");
        if (seq != -1) c.seqs = bit(seq);
    }
    std::vector<std::span<const uint8_t>> rows;
    for (size_t il = 0; il < layers_.size(); ++il)
        for (int kv = 0; kv < 2; ++kv)
            rows.push_back(in.take(n_cells * cell_row_bytes(il), "the cached rows"));
    in.expect_end();

    // Where the cells go: their old indices when free, else the lowest free cells.
    std::vector<bool> taken(cells_.size(), false);
    for (size_t c = 0; c < cells_.size(); ++c)
        taken[c] = seq != -1 && cells_[c].pos >= 0 && cells_[c].seqs != bit(seq);
    std::vector<int32_t> target(n_cells, -1);
    for (uint32_t i = 0; i < n_cells; ++i)
        if (index[i] >= 0 && static_cast<size_t>(index[i]) < cells_.size() &&
            !taken[static_cast<size_t>(index[i])]) {
            target[i] = index[i];
            taken[static_cast<size_t>(index[i])] = true;
        }
    size_t next_free = 0;
    for (uint32_t i = 0; i < n_cells; ++i) {
        if (target[i] >= 0) continue;
        while (next_free < cells_.size() && taken[next_free])
            ++next_free;
        if (next_free == cells_.size())
            fail(status::context_full, "the state's ", n_cells, " cells do not fit in the ",
                 cells_.size() - static_cast<size_t>(std::count(taken.begin(), taken.end(), true)),
                 " free cells of this context");
        target[i] = static_cast<int32_t>(next_free);
        taken[next_free] = true;
    }

    // The last allocation: from here on nothing throws before the cache is whole again.
    const std::vector<cell_run> runs = runs_of(target);
    if (seq == -1) {
        std::fill(cells_.begin(), cells_.end(), cell{});
    } else {
        for (cell& c : cells_) {
            c.seqs &= ~bit(seq);
            free_if_empty(c);
        }
    }
    for (uint32_t i = 0; i < n_cells; ++i)
        cells_[static_cast<size_t>(target[i])] = loaded[i];
    for (size_t il = 0; il < layers_.size(); ++il) {
        device& dev = device_of(il);
        const buffer& memory = memory_of(il);
        const size_t row = cell_row_bytes(il);
        for (int kv = 0; kv < 2; ++kv) {
            const pib_tensor& t = kv == 0 ? layers_[il].k : layers_[il].v;
            const std::span<const uint8_t> data = rows[il * 2 + static_cast<size_t>(kv)];
            for (const cell_run& r : runs)
                dev.upload(memory, t.offset + static_cast<size_t>(r.first) * row,
                           data.data() + r.at * row, static_cast<size_t>(r.count) * row);
        }
    }
    mark_all_changed();
    publish();
}

} // namespace pi
