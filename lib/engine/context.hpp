#pragma once
// The run state of one conversation. The context orchestrates the forward pass over the rooms
// that hold its state: the activation arena (arena.hpp), the KV cache (kv_cache.hpp), the
// offload device's side (device_half.hpp) and what it counts (run_counters.hpp).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/device.hpp"
#include "engine/arena.hpp"
#include "engine/kv_cache.hpp"
#include "engine/run_counters.hpp"
#include "model/model.hpp"

namespace pi {

class offload;
struct offload_layer;
class device_half;

struct context_options {
    int32_t n_ctx = 512;
    int32_t n_seq_max = 1; // sequences the KV cache holds, ids [0, n_seq_max)
    int32_t n_batch = 512;
    int32_t n_threads = 1;
    bool kv_f16 = true;
    bool audit_predictor = false;
    // Dense blocks and hot neurons on a device; must outlive the context.
    const offload* offloaded = nullptr;
    bool count_activations = false; // per-neuron counts of predicted activity (calibration)
};

// One layer's FFN for one batch, as the engine computed it (docs/ffn-observer.md).
// The spans point into the context's arena and are valid only during the observer's call.
struct ffn_observation {
    int32_t layer = 0;
    int32_t n_tokens = 0;
    std::span<const float> input; // [n_tokens][n_embd]: the residual before ffn_norm
    std::span<const float>
        activation; // [n_tokens][n_ff]: after the GLU, before the down projection
};
// Returns false to stop the decode (it then fails with status::cancelled).
using ffn_observer = std::function<bool(const ffn_observation&)>;

struct batch_view {
    std::span<const int32_t> tokens;
    std::span<const int32_t> pos;    // empty: each token follows its sequence's last
    std::span<const int8_t> logits;  // empty: see last_of_each_sequence
    std::span<const int32_t> seqs{}; // empty: every token in sequence `seq`
    int32_t seq = 0;
    // With no logits flags: true, the logits of each sequence's last token; false, of the
    // batch's last token only.
    bool last_of_each_sequence = false;
};

class context {
  public:
    context(const model& m, const context_options& options);
    ~context();

    const model& get_model() const noexcept { return model_; }
    const context_options& options() const noexcept { return options_; }

    // Runs the batch; throws pi::error (invalid_argument, context_full, cancelled, ...).
    void decode(const batch_view& batch);
    // Logits of token i of the last batch (-1 = last with logits); empty if not requested.
    std::span<const float> logits(int32_t i) const noexcept;

    // Sequence 0's next position.
    int32_t n_past() const { return kv_.pos_max(0) + 1; }
    void truncate(int32_t pos); // forget cached positions >= pos of every sequence
    // The KV cache's sequences and their edits (kv_cache.hpp).
    kv_cache& cache() noexcept { return kv_; }
    const kv_cache& cache() const noexcept { return kv_; }

    // The cache of one sequence (-1: all) and, for all, the last batch's logits.
    void save_state(int32_t seq, byte_writer& out) const;
    void load_state(int32_t seq, byte_reader& in); // nothing changes when it throws

    void cancel() noexcept { cancel_.store(true, std::memory_order_relaxed); }
    void clear_cancel() noexcept { cancel_.store(false, std::memory_order_relaxed); }
    const run_stats& stats() const noexcept { return counters_.stats(); }
    // Sets (or, with an empty function, removes) the observer of every layer's FFN; throws
    // status::unsupported when some layer's FFN runs on an offload device.
    void set_ffn_observer(ffn_observer observer);
    // Per layer: FFN neurons computed, summed over the tokens counted in stats().
    const std::vector<uint64_t>& layer_active_neurons() const noexcept {
        return counters_.layer_active();
    }
    const std::vector<predictor_audit>& audits() const noexcept { return counters_.audits(); }
    // Per layer, per neuron: tokens for which the predictor selected the neuron.
    const std::vector<std::vector<float>>& activation_counts() const noexcept {
        return counters_.activation_counts();
    }
    // Whether attention of this context's device layers reads a KV cache in device memory.
    bool kv_on_device() const noexcept { return kv_.any_on_device(); }
    void reset_stats() noexcept { counters_.reset(); }

  private:
    // Reads the batch's sequences and positions into batch_seq_ and batch_pos_, and its logits
    // rows into out_rows_.
    void prepare_batch(const batch_view& batch);
    void forward(int32_t n, std::span<const int32_t> out_rows);
    void output_block(int32_t n, std::span<const int32_t> out_rows);
    void attention_block(size_t il, int32_t n);
    // The normalised rows the Q, K and V projections read (docs/forward-pass.md).
    pib_tensor attention_input(device& dev, const arena_tensors& a, const layer_weights& w,
                               int32_t n);
    // A parallel block's attention norm of the layer input, made before the FFN changes it.
    void parallel_norms(size_t il, int32_t n);
    void project_qkv(device& dev, const arena_tensors& a, const layer_weights& w, int32_t n,
                     const pib_tensor& in);
    void add_positions(int32_t n);
    void store_and_attend(device& dev, const arena_tensors& a, size_t il, int32_t n);
    void project_out(device& dev, const arena_tensors& a, const layer_weights& w, int32_t n);
    void ffn_block(size_t il, int32_t n);
    void sparse_ffn(size_t il, int32_t n);
    void dense_ffn(size_t il, int32_t n);
    void predict(device& dev, const arena_tensors& a, const layer_weights& w, int32_t n);
    // Hands the observer this layer's FFN input and activation (both in the host arena).
    void observe_ffn(size_t il, int32_t n);
    // A decoded token's nonzero FFN activations in the host arena: the rows of ffn_down_t the
    // accumulate reads (sparse products write 0 for unlisted neurons, so they count none).
    uint64_t nonzero_activations();
    // Adds a sparse layer's neurons and (for a decoded token) the bytes its FFN read.
    void account_ffn(size_t il, int32_t n, uint64_t active, uint64_t down_rows);
    // Accounts the layers whose lists' lengths stayed on the device, in one download.
    void settle_device_counts(int32_t n);
    // Whether the block after layer il's FFN (the next attention, or the output) runs on the
    // offload device.
    bool next_block_on_device(size_t il) const noexcept;
    const offload_layer* offloaded_layer(size_t il) const noexcept;
    void x_to_host(int32_t n);
    void x_to_device(int32_t n);
    void check_cancel() const;
    // The copies between the host and the offload device since the last call.
    link_tally take_link_tally() noexcept;
    // The offload device when a batch of n tokens runs in a graph session, else null.
    device* graph_device(int32_t n) const noexcept;

    const model& model_;
    context_options options_;
    std::unique_ptr<device> cpu_;
    arena host_;
    kv_cache kv_;
    std::unique_ptr<device_half> offload_half_; // with an offload device only
    run_counters counters_;
    std::vector<int32_t> batch_pos_;     // [n_batch] positions of the batch's tokens
    std::vector<int32_t> position_rows_; // [n_batch] learned positions: position_embd rows
    std::vector<int32_t> batch_seq_;     // [n_batch] their sequences
    std::vector<int32_t> batch_cells_;   // [n_batch] the KV cells they are stored in
    std::vector<int64_t> batch_pairs_;   // [n_batch] scratch: (sequence, position) pairs
    std::vector<int32_t> next_pos_;      // [n_seq_max] scratch: each sequence's next position
    std::vector<int32_t> out_rows_;      // [n_batch] tokens whose logits are computed
    std::vector<int32_t> active_counts_; // [n_batch] length of each token's active list
    // Layers of the current batch the device predicted with hot neurons: accounted when the
    // batch ends, with the lengths of their hot lists.
    struct pending_ffn {
        size_t layer;
        int32_t n_tokens;
        uint64_t host_active; // the cold neurons' count
    };
    std::vector<pending_ffn> pending_ffn_;
    std::vector<float> logits_; // [n_out][n_vocab]
    std::vector<int32_t> logits_row_of_token_;
    int32_t n_outputs_ = 0;
    std::atomic<bool> cancel_{false};
    ffn_observer ffn_observer_;
};

} // namespace pi
