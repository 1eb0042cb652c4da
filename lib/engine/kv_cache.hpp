#pragma once
// The KV cache of a context: per layer, the K and V rows of n_ctx cells, in host memory or, for
// layers whose attention runs on the offload device, in the device's memory (F16). A cell holds
// one position and token shared by a set of sequences (copies share cells); for each sequence the
// position of every cell in it, -1 elsewhere, is mirrored wherever attention reads it, which is
// how a token attends only to its own sequence (docs/sequences.md).
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/device.hpp"
#include "engine/link_tally.hpp"
#include "model/model.hpp"
#include "support/byte_stream.hpp"

namespace pi {

class offload;

class kv_cache {
  public:
    // Host cells are F16 or F32; the device keeps F16 cells for its attention layers when the
    // offload reserved room for n_ctx of them, else every layer's cache stays on the host.
    kv_cache(device& host, const offload* off, const hparams& h, int32_t n_ctx, int32_t n_seq,
             bool f16);

    // Device bytes per layer of a cache of n_ctx F16 cells (the cells' positions included).
    static uint64_t device_layer_bytes(const hparams& h, int32_t n_ctx);

    struct layer_cells {
        pib_tensor k, v;
    };
    // Layer il's cells, where its attention reads them.
    const layer_cells& layer(size_t il) const noexcept { return layers_[il]; }
    bool on_device(size_t il) const noexcept { return on_device_[il]; }
    bool any_on_device() const noexcept { return device_ != nullptr; }
    // Sequence seq's view of the first span() cells, in host or device memory.
    pib_tensor host_positions(int32_t seq) const noexcept {
        return view_of(host_views_, seq, span_);
    }
    pib_tensor device_positions(int32_t seq) const noexcept {
        return view_of(device_views_, seq, device_span());
    }
    int32_t n_ctx() const noexcept { return static_cast<int32_t>(cells_.size()); }
    int32_t n_seq() const noexcept { return n_seq_; }
    // Cells up to the last occupied one: what attention of the current batch spans.
    int32_t span() const noexcept { return span_; }
    // What attention on the device spans: span() rounded up to 256 cells, within n_ctx. The
    // cells past span() are free (-1 in every view), so the result is the same, and a decoded
    // token's kernel arguments, with them its graph (docs/hybrid.md), stay the same for 256
    // tokens.
    int32_t device_span() const noexcept {
        constexpr int32_t step = 256;
        const int32_t padded = (span_ + step - 1) / step * step;
        return padded < n_ctx() ? padded : n_ctx();
    }
    // Bytes one decoded token reads from a layer's cache.
    uint64_t bytes_read_per_layer() const noexcept;
    // The copies to and from the offload device since the last call.
    link_tally take_device_tally() noexcept { return std::exchange(device_tally_, link_tally{}); }

    // Claims a cell for each of a batch's (sequence, position, token), written to `cells`: the
    // cell holding that position of that sequence alone is reused, else the lowest free one.
    // Sequences are valid and pairs distinct (checked by the caller). Throws status::context_full
    // when too few cells are free, with nothing changed.
    void place(std::span<const int32_t> seqs, std::span<const int32_t> positions,
               std::span<const int32_t> tokens, std::span<int32_t> cells);
    // Empties these cells, e.g. after a failed batch.
    void forget(std::span<const int32_t> cells);

    // Edits of [p0, p1) of a sequence (p1 < 0: to the end); seq ids are checked here.
    void remove(int32_t seq, int32_t p0, int32_t p1); // seq -1: every sequence
    void copy(int32_t src, int32_t dst, int32_t p0, int32_t p1);
    void keep(int32_t seq);
    // Moves positions by delta, re-rotating the cached keys; cells shared with other sequences are
    // first copied so that those keep their positions.
    void shift(int32_t seq, int32_t p0, int32_t p1, int32_t delta);

    int32_t pos_min(int32_t seq) const; // -1: empty
    int32_t pos_max(int32_t seq) const; // -1: empty
    int32_t used_cells() const noexcept;
    // The tokens of seq at positions 0, 1, ... up to the first position it does not hold.
    std::vector<int32_t> leading_tokens(int32_t seq) const;

    // The cells of one sequence (seq >= 0) or of all (-1) with their K and V rows.
    void save(int32_t seq, byte_writer& out) const;
    // Reads what save wrote, the rest of `in`, checking it all before anything changes; a single
    // sequence's cells replace sequence seq. Throws status::format for a blob of another shape,
    // status::context_full when it needs more cells or sequences than this cache has.
    void load(int32_t seq, byte_reader& in);

  private:
    struct cell {
        int32_t pos = -1; // -1: free
        int32_t token = -1;
        uint64_t seqs = 0; // bit s: the cell belongs to sequence s
    };
    // Room for a chunk of cache edits on one device: rows read from the cache, the cells they
    // come from and a value per cell (a destination cell, or a position delta).
    struct scratch {
        buffer memory;
        pib_tensor rows, cells, values; // F32 [row][chunk], I32 [chunk] x2
    };
    struct scratch_view {
        pib_tensor rows, cells, values; // the chunk's rows and entries
    };

    pib_tensor view_of(pib_tensor t, int32_t seq, int32_t cells) const noexcept {
        t.offset += static_cast<size_t>(seq) * t.nb1;
        t.ne0 = cells;
        t.ne1 = 1;
        return t;
    }
    void check_seq(int32_t seq, const char* what) const;
    // The cell holding this position of this sequence, -1 when none does.
    int32_t cell_of(int32_t seq, int32_t pos) const noexcept;
    bool in_range(const cell& c, int32_t seq, int32_t p0, int32_t p1) const noexcept;
    void free_if_empty(cell& c) noexcept;
    void mark_all_changed() noexcept { changed_ = ~0ull; }
    void publish();
    // For each chunk of cells, on the host and on the device when it holds cells: puts the cells
    // and their values in that device's scratch and calls f(device, view, layer) for each layer
    // cached there.
    template <typename F>
    void in_chunks(std::span<const int32_t> cells, std::span<const int32_t> values, F&& f);
    // Copies the K and V rows of cells from[i] into to[i], in every layer.
    void copy_rows(std::span<const int32_t> from, std::span<const int32_t> to);
    // Rotates the cached keys of cells by their deltas, in every layer.
    void rotate_keys(std::span<const int32_t> cells, std::span<const int32_t> deltas);
    size_t cell_row_bytes(size_t il) const noexcept;
    device& device_of(size_t il) const noexcept { return on_device_[il] ? *device_ : host_; }
    const buffer& memory_of(size_t il) const noexcept {
        return on_device_[il] ? device_memory_ : host_memory_;
    }

    device& host_;
    device* device_ = nullptr; // the offload device when it holds cells, else null
    // Its offload, when it does: copies and edits of the device's cells take its turn.
    const offload* offload_ = nullptr;
    const hparams& h_;
    ggml_type host_type_;
    int64_t row_elements_;
    int32_t n_seq_;
    std::vector<bool> on_device_;
    buffer host_memory_, device_memory_;
    std::vector<layer_cells> layers_;
    pib_tensor host_views_{}, device_views_{}; // I32 [n_ctx][n_seq]
    scratch host_scratch_, device_scratch_;
    std::vector<cell> cells_;
    std::vector<int32_t> views_; // [n_seq][n_ctx], what host_views_ and device_views_ hold
    uint64_t changed_ = 0;       // sequences whose views must be published
    // Until the first publish succeeds (or after one failed) the buffers do not mirror views_:
    // publish then writes whole rows, else only the cells whose view changed.
    bool publish_all_ = true;
    std::vector<int32_t> publish_row_; // [n_ctx] scratch
    link_tally device_tally_;
    int32_t span_ = 0;
};

} // namespace pi
