#pragma once
// What of a model lives in an offload device's memory (docs/forward-pass.md, docs/planner.md,
// docs/hybrid.md): the dense groups the planner placed (attention, predictor, ffn_norm per
// layer; output) and the hot FFN neurons, gathered so that device row k of a layer holds host
// row hot[k] of ffn_up, ffn_gate and ffn_down_t. The device's copy of fc2 is ordered the same
// way, hot first: its row k < hot.size() scores neuron hot[k], its row hot.size() + j scores
// neuron cold[j], so that the device's scores select its own rows directly and only the cold
// lists need ids the host knows. Shared by every context of a model; everything else stays in
// the mmapped file and runs on the CPU.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/device.hpp"
#include "model/model.hpp"

namespace pi {

namespace planner {
struct plan;
}

// The device scratch of a context is planned for batches of at most this many tokens; contexts of
// an offloading model use no larger batches.
constexpr int32_t max_offload_batch = 512;

// Which parts go to the device. Vectors are per layer; empty dense vectors mean "none".
struct offload_placement {
    std::vector<std::vector<int32_t>> hot; // ascending neuron ids per layer
    std::vector<bool> attn, predictor, ffn_norm;
    bool output = false;
    // > 0: contexts with n_ctx up to this keep the KV cache of device attention layers on the
    // device (F16 cells); 0: the KV cache stays in host memory.
    int32_t kv_n_ctx = 0;
};

// The placement a plan describes; kv_n_ctx is used when the plan put the KV cache on the device.
offload_placement placement_of(const planner::plan& p, int32_t kv_n_ctx);

// The device's copy of the tensors of a group packed into one allocation, each tensor starting
// at a multiple of device_tensor_alignment; returns the group's bytes.
constexpr size_t device_tensor_alignment = 256;
uint64_t packed_bytes(std::initializer_list<const pib_tensor*> tensors);

struct offload_layer {
    std::vector<int32_t> hot;          // ascending neuron ids on the device
    std::vector<int32_t> cold;         // the other neuron ids, ascending
    std::vector<int32_t> device_row;   // per neuron: its device row, or -1 when cold
    buffer weights;                    // the gathered rows of up, gate and down_t
    pib_tensor up{}, gate{}, down_t{}; // [n_embd][hot.size()] views into `weights`
    buffer attn_mem, predictor_mem, ffn_norm_mem;
    // Device views of the placed dense tensors: attn_norm, wq, wk, wv, wo when attn_mem holds
    // them, fc1 and fc2 (rows hot first; and predictor_rank) with predictor_mem, ffn_norm with
    // ffn_norm_mem.
    layer_weights dense{};
    bool has_attn() const noexcept { return static_cast<bool>(attn_mem); }
    bool has_predictor() const noexcept { return static_cast<bool>(predictor_mem); }
    bool has_ffn_norm() const noexcept { return static_cast<bool>(ffn_norm_mem); }
    bool all_hot(int32_t n_ff) const noexcept { return static_cast<int32_t>(hot.size()) == n_ff; }
    int64_t n_hot() const noexcept { return static_cast<int64_t>(hot.size()); }
};

class offload {
  public:
    // Uploads the placed tensors; throws pi::error(out_of_memory) when the device cannot hold
    // them, invalid_argument for a placement that does not fit the model.
    offload(const model& m, std::unique_ptr<device> dev, const offload_placement& placement);
    ~offload();

    device& dev() const noexcept { return *dev_; }
    const offload_layer& layer(size_t il) const noexcept { return layers_[il]; }
    size_t n_layers() const noexcept { return layers_.size(); }
    int32_t max_hot() const noexcept { return max_hot_; }
    uint64_t bytes_allocated() const noexcept { return bytes_; }
    bool has_output() const noexcept { return static_cast<bool>(output_mem_); }
    const pib_tensor& output_norm() const noexcept { return output_norm_; }
    const pib_tensor& output() const noexcept { return output_; }
    int32_t kv_n_ctx() const noexcept { return kv_n_ctx_; }
    bool any_dense() const noexcept;
    // Contexts sharing this offload take turns on the device: a context holds this for a whole
    // batch, whose kernels may be recorded in a graph session (docs/hybrid.md) that another
    // context's calls must not enter, and for its KV cache's copies and edits there. Recursive:
    // a batch edits its cache.
    std::unique_lock<std::recursive_mutex> take_turn() const { return std::unique_lock(turn_); }

  private:
    buffer upload_group(std::initializer_list<std::pair<const pib_tensor*, pib_tensor*>> tensors);

    const model& model_;
    std::unique_ptr<device> dev_;
    std::vector<offload_layer> layers_;
    buffer output_mem_;
    pib_tensor output_norm_{}, output_{};
    int32_t max_hot_ = 0;
    int32_t kv_n_ctx_ = 0;
    uint64_t bytes_ = 0;
    mutable std::recursive_mutex turn_;
};

// The offload's turn when there is one (offload::take_turn), else a lock that holds nothing.
inline std::unique_lock<std::recursive_mutex> turn_on(const offload* off) {
    return off != nullptr ? off->take_turn() : std::unique_lock<std::recursive_mutex>();
}

} // namespace pi
