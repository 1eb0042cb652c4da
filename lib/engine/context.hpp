#pragma once
// The run state of one conversation: KV cache, scratch arena, statistics, cancellation.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "backend/device.hpp"
#include "model/model.hpp"

namespace pi {

class offload;
struct offload_layer;

struct context_options {
    int32_t n_ctx = 512;
    int32_t n_batch = 512;
    int32_t n_threads = 1;
    bool kv_f16 = true;
    bool audit_predictor = false;
    // Dense blocks and hot neurons on a device; must outlive the context.
    const offload* offloaded = nullptr;
    bool count_activations = false; // per-neuron counts of predicted activity (calibration)
};

struct predictor_audit {
    uint64_t tokens = 0, true_active = 0, predicted_active = 0, true_positive = 0;
};

struct run_stats {
    uint64_t n_prompt_tokens = 0;
    uint64_t n_decode_tokens = 0;
    double prompt_seconds = 0.0;
    double decode_seconds = 0.0;
    uint64_t ffn_active_neurons = 0; // summed over layers and tokens of sparse layers
    uint64_t ffn_total_neurons = 0;
    uint64_t decode_bytes = 0; // weights + KV cache read by single-token batches
};

// One layer's FFN for one batch, as the engine computed it (docs/ffn-observer.md).
// The spans point into the context's arena and are valid only during the observer's call.
struct ffn_observation {
    int32_t layer = 0;
    int32_t n_tokens = 0;
    std::span<const float> input;      // [n_tokens][n_embd]: the residual before ffn_norm
    std::span<const float> activation; // [n_tokens][n_ff]: after the GLU, before the down projection
};
// Returns false to stop the decode (it then fails with status::cancelled).
using ffn_observer = std::function<bool(const ffn_observation&)>;

struct batch_view {
    std::span<const int32_t> tokens;
    std::span<const int32_t> pos;   // empty: consecutive after n_past
    std::span<const int8_t> logits; // empty: last token only
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

    int32_t n_past() const noexcept { return n_past_; }
    void truncate(int32_t pos); // forget cached positions >= pos

    void cancel() noexcept { cancel_.store(true, std::memory_order_relaxed); }
    void clear_cancel() noexcept { cancel_.store(false, std::memory_order_relaxed); }
    const run_stats& stats() const noexcept { return stats_; }
    // Sets (or, with an empty function, removes) the observer of every layer's FFN; throws
    // status::unsupported when some layer's FFN runs on an offload device.
    void set_ffn_observer(ffn_observer observer);
    // Per layer: FFN neurons computed, summed over the tokens counted in stats().
    const std::vector<uint64_t>& layer_active_neurons() const noexcept { return layer_active_; }
    const std::vector<predictor_audit>& audits() const noexcept { return audits_; }
    // Per layer, per neuron: tokens for which the predictor selected the neuron.
    const std::vector<std::vector<float>>& activation_counts() const noexcept {
        return activation_counts_;
    }
    // Device bytes a context with this batch size allocates for its activations on an offload
    // device holding at most max_hot neurons of a layer.
    static uint64_t device_scratch_bytes(const model& m, int32_t n_batch, int32_t max_hot);
    // Device bytes per layer of a KV cache of n_ctx F16 cells (the cells' positions included).
    static uint64_t device_kv_layer_bytes(const hparams& h, int32_t n_ctx);
    // Whether attention of this context's device layers reads a KV cache in device memory.
    bool kv_on_device() const noexcept { return kv_dev_; }
    void reset_stats() noexcept;

  private:
    struct arena_layout;
    struct arena_spec;
    static size_t layout_arena(arena_layout& a, const model& m, const arena_spec& spec);
    static arena_spec device_arena_spec(int64_t n_batch, int64_t max_hot);
    void forward(int32_t n_tokens, std::span<const int32_t> out_rows);
    void output_block(int32_t n, std::span<const int32_t> out_rows);
    void attention_block(size_t il, int32_t n);
    void project_qkv(device& dv, const arena_layout& a, const layer_weights& w, int32_t n);
    void store_and_attend(device& dv, const arena_layout& a, size_t il, int32_t n);
    void project_out(device& dv, const arena_layout& a, const layer_weights& w, int32_t n);
    void ffn_block(size_t il, int32_t n);
    // Hands the observer this layer's FFN input and activation (both in the host arena).
    void observe_ffn(size_t il, int32_t n);
    // A decoded token's nonzero FFN activations in the host arena: the rows of ffn_down_t the
    // accumulate reads (sparse products write 0 for unlisted neurons, so they count none).
    uint64_t nonzero_activations();
    void predict(device& dv, const arena_layout& a, const layer_weights& w, int32_t n);
    void device_ffn(size_t il, int32_t n);
    void lists_to_host(int32_t n);
    void upload_positions(int32_t n);
    // The residual stream lives on the host, on the offload device, or on both.
    void x_to_host(int32_t n);
    void x_to_device(int32_t n);
    void host_to_device(const pib_tensor& host, const pib_tensor& dev, size_t bytes);
    void device_to_host(const pib_tensor& dev, const pib_tensor& host, size_t bytes);
    const offload_layer* offloaded_layer(size_t il) const noexcept;
    void check_cancel() const;
    void forget_cells(std::span<const int32_t> positions);
    void audit_layer(size_t il, int32_t n);
    void hybrid_ffn(size_t il, int32_t n, bool lists_on_device);
    void device_half(size_t il, int32_t n);
    void worker_loop();
    void start_device_half(size_t il, int32_t n);
    void wait_device_half();

    const model& model_;
    context_options options_;
    std::unique_ptr<device> dev_;
    std::unique_ptr<arena_layout> at_;
    buffer arena_;
    buffer kv_;
    std::vector<int32_t> kv_pos_host_; // position held by each cache row, -1 if empty
    std::vector<int32_t> pos_host_;    // scratch for positions of a batch
    std::vector<int32_t> out_rows_host_;
    std::vector<int32_t> counts_host_;
    std::vector<float> logits_; // [n_out][n_vocab]
    std::vector<int32_t> logits_row_of_token_;
    int32_t n_outputs_ = 0;
    int32_t n_past_ = 0;
    int32_t n_kv_ = 0; // cache rows the attention of the current batch spans
    std::atomic<bool> cancel_{false};
    run_stats stats_;
    std::vector<uint64_t> layer_active_;
    std::vector<predictor_audit> audits_; // per layer, when auditing
    std::vector<float> audit_act_host_;   // [n_batch][n_ff] true activations
    std::vector<int32_t> audit_idx_host_; // [n_batch][n_ff] predicted lists
    std::vector<uint8_t> audit_mark_;     // [n_ff] scratch
    std::vector<std::vector<float>> activation_counts_;
    void count_layer(size_t il, int32_t n);
    ffn_observer ffn_observer_;

    // The offload device's activations (same tensors as the host arena where both run a block,
    // plus the hybrid FFN's hot lists and partial sum) and its KV cache.
    std::unique_ptr<arena_layout> dl_;
    buffer device_arena_;
    buffer device_kv_;
    bool kv_dev_ = false;
    bool x_on_host_ = true, x_on_device_ = false;
    uint8_t* host_base_ = nullptr;        // the host arena's memory
    std::vector<int32_t> idx_host_;       // [n_batch][n_ff] active lists, split in place to cold
    std::vector<int32_t> hot_idx_host_;   // [n_batch][max_hot] device rows of active hot neurons
    std::vector<int32_t> hot_count_host_; // [n_batch]
    std::mutex worker_mutex_;
    std::condition_variable worker_cv_;
    bool worker_has_job_ = false, worker_stop_ = false;
    size_t job_layer_ = 0;
    int32_t job_tokens_ = 0;
    std::exception_ptr worker_error_;
    std::thread worker_;
};

} // namespace pi
