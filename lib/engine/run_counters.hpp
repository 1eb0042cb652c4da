#pragma once
// What a context counts while it decodes: throughput and bytes read (run_stats), FFN neurons
// computed per layer, the predictor audit (its lists against the dense FFN's truly active
// neurons) and calibration counts (per neuron, the tokens for which the predictor selected it).
#include <cstdint>
#include <span>
#include <vector>

#include "backend/device.hpp"
#include "engine/arena.hpp"
#include "engine/link_tally.hpp"
#include "model/model.hpp"

namespace pi {

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
    // Copies between the host and the offload device (docs/hybrid.md): all batches, and
    // single-token batches alone.
    link_tally link, decode_link;
    // Single-token batches on an offload device with graph sessions (pib_backend.h version 6):
    // the kernels it ran and the submissions they took.
    uint64_t decode_device_kernels = 0, decode_device_launches = 0;
};

// The bytes of a 2-D tensor: what reading it whole costs a decoded token.
inline uint64_t bytes_of(const pib_tensor& t) {
    return static_cast<uint64_t>(t.nb1) * static_cast<uint64_t>(t.ne1);
}

class run_counters {
  public:
    // audit: the host arena has the audit tensors; both need the lists on the host.
    run_counters(const model& m, int32_t n_batch, bool audit, bool count_activations);

    const run_stats& stats() const noexcept { return stats_; }
    const std::vector<uint64_t>& layer_active() const noexcept { return layer_active_; }
    const std::vector<predictor_audit>& audits() const noexcept { return audits_; }
    const std::vector<std::vector<float>>& activation_counts() const noexcept {
        return activation_counts_;
    }
    // Audits and calibration counts read the predictor's lists in the host arena.
    bool need_lists_on_host() const noexcept {
        return !audits_.empty() || !activation_counts_.empty();
    }

    void add_batch(int32_t n_tokens, double seconds) noexcept;
    void add_decode_bytes(uint64_t bytes) noexcept { stats_.decode_bytes += bytes; }
    void add_link(int32_t n_tokens, const link_tally& t) noexcept {
        stats_.link.add(t);
        if (n_tokens == 1) stats_.decode_link.add(t);
    }
    void add_graphs(int32_t n_tokens, uint64_t kernels, uint64_t launches) noexcept {
        if (n_tokens != 1) return;
        stats_.decode_device_kernels += kernels;
        stats_.decode_device_launches += launches;
    }
    void add_ffn(size_t il, int32_t n_tokens, uint64_t active) noexcept;
    // The predictor's lists of a layer (in the host arena, `counts` long) for the audit and the
    // calibration counts; the audit runs the dense FFN on the host to find the truth.
    void add_lists(device& host, const arena& host_arena, size_t il, int32_t n,
                   std::span<const int32_t> counts);
    void reset() noexcept;

  private:
    void audit_layer(device& host, const arena& host_arena, size_t il, int32_t n,
                     std::span<const int32_t> counts);
    void count_layer(device& host, const arena& host_arena, size_t il, int32_t n,
                     std::span<const int32_t> counts);

    const model& model_;
    run_stats stats_;
    std::vector<uint64_t> layer_active_;
    std::vector<predictor_audit> audits_; // per layer, when auditing
    std::vector<std::vector<float>> activation_counts_;
    std::vector<float> true_activations_; // [n_batch][n_ff]
    std::vector<int32_t> lists_;          // [n_batch][n_ff] predicted lists
    std::vector<uint8_t> selected_;       // [n_ff] scratch
};

} // namespace pi
