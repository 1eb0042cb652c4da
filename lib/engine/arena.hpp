#pragma once
// The activation tensors of a context, each device's in one allocation: the host arena serves
// every block; an offload device's arena serves the blocks placed there and the hot half of the
// hybrid FFN.
#include <cstddef>
#include <cstdint>

#include "backend/device.hpp"
#include "model/model.hpp"

namespace pi {

// Appends tensors of `rows` rows of `cols` elements to a layout being measured, each starting at
// a multiple of the alignment.
class layout_builder {
  public:
    explicit layout_builder(size_t alignment) : alignment_(alignment) {}
    pib_tensor add(ggml_type type, int64_t cols, int64_t rows);
    size_t reserve(size_t bytes);
    size_t size() const noexcept { return size_; }

  private:
    size_t alignment_;
    size_t size_ = 0;
};

// Views of every activation tensor of one arena, each sized for n_batch rows. Tensors an arena
// does not need keep ne1 == 0.
struct arena_tensors {
    pib_tensor ids, pos, cells, out_rows, count, all_count; // cells: the KV cell of each token
    pib_tensor position_rows; // learned positions (OPT): the position_embd row of each token
    pib_tensor x, xn, q, k, v, att, tmp;
    size_t predictor_hidden_offset = 0; // [n_batch][largest predictor rank] floats
    pib_tensor p, idx, all_idx, u, g;
    pib_tensor xo, logits;
    pib_tensor audit_up, audit_gate; // dense FFN activations for the predictor audit
    pib_tensor hot_idx, hot_count, hot_up, hot_gate, partial; // the device half of a hybrid FFN
    // Device only: I32 [n_batch * n_layer], the lengths of the lists a device-predicted layer
    // keeps on the device; a batch of n tokens uses elements [il * n, (il + 1) * n) for layer
    // il, so that one download after the batch brings every layer's counts.
    pib_tensor layer_counts;
    // Device only: where pos, cells and out_rows share a region of 3 * n_batch elements
    // (arena::pack_batch_inputs).
    size_t batch_inputs_offset = 0;
    pib_buffer* mem = nullptr;
    size_t size = 0;
};

// What an arena holds besides the activations every block needs.
struct arena_spec {
    int64_t n_batch = 1;
    bool host = true; // token ids, dense FFN and the all-neuron lists live on the host only
    bool audit = false;
    int64_t max_hot = 0;     // device only, > 0: the hybrid FFN's tensors for this many neurons
    int64_t logits_rows = 1; // output rows computed at once
};

// The one definition of an arena's layout: the allocations and the planner's scratch estimate
// both use it.
arena_tensors layout_arena(const model& m, const arena_spec& spec);
// An offload device's arena: logits take n_vocab floats a row, so the device computes them a few
// rows at a time.
arena_spec device_arena_spec(int64_t n_batch, int64_t max_hot);
// Device bytes a context with this batch size allocates for its activations on an offload
// device holding at most max_hot neurons of a layer.
uint64_t device_arena_bytes(const model& m, int32_t n_batch, int32_t max_hot);

// An arena allocated on one device, every tensor bound to the allocation.
class arena {
  public:
    // With `pinned_by` (a device with host_alloc; dev is then the CPU), the allocation is that
    // device's page-locked host memory, which dev wraps: what the arena exchanges with the
    // device crosses without a staging copy.
    arena(device& dev, const model& m, const arena_spec& spec, device* pinned_by = nullptr);

    const arena_tensors& tensors() const noexcept { return tensors_; }
    const buffer& memory() const noexcept { return memory_; }
    // The allocation's address where the host can read it (the CPU backend's arenas), else null.
    uint8_t* host_data() const noexcept { return host_data_; }
    template <typename T> const T* host_rows(const pib_tensor& t) const noexcept {
        return reinterpret_cast<const T*>(host_data_ + t.offset);
    }

    bool pinned() const noexcept { return static_cast<bool>(pinned_); }

    // A device arena: lays an n-token batch's pos, cells and out_rows end to end at the start of
    // their region, so that one upload of [positions | cells | output rows] fills all three.
    // Returns the region's offset.
    size_t pack_batch_inputs(int64_t n_tokens) noexcept;

  private:
    arena_tensors tensors_;
    host_memory pinned_; // outlives memory_, which wraps it
    buffer memory_;
    uint8_t* host_data_ = nullptr;
};

} // namespace pi
