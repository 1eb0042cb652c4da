#pragma once
// From a VRAM budget to a device placement: statistics (a file, PowerInfer's activation folder or a
// calibration run), the planner, the GPU index cache, and the upload.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/offload.hpp"
#include "planner/planner.hpp"

namespace pi {

struct offload_request {
    std::string model_path;
    int64_t budget = -1;            // bytes; < 0: the device's free memory minus a safety margin
    bool reset_gpu_index = false;   // ignore a cached GPU index and re-plan
    bool disable_gpu_index = false; // no FFN offloading at all
    std::string stats_path;         // activation statistics (ours or a PowerInfer folder); optional
    int32_t n_batch = max_offload_batch;
    int32_t kv_n_ctx = 0; // KV cache positions to reserve on the device; 0: none
};

struct offload_result {
    std::unique_ptr<offload> placed; // null when nothing goes to the device
    planner::plan plan;
    std::string source; // where the hot sets came from
};

// Plans and uploads. The device is consumed; throws pi::error on bad input or allocation failure.
offload_result place_on_device(const model& m, std::unique_ptr<device> dev,
                               const offload_request& request);

// The planner's input for this engine: every dense group as offload packs it, the KV cache of a
// context of kv_n_ctx positions (F16), the device arena of a context of n_batch tokens, one
// neuron's gathered rows, and which groups a device computing weight_types (pib_device_info)
// can hold.
planner::plan_input plan_input_for(const model& m, uint64_t budget, int32_t n_batch,
                                   int32_t kv_n_ctx, uint64_t weight_types);

// Per-neuron activation counts from running the model's predictors over a built-in text.
std::vector<std::vector<float>> calibrate_activations(const model& m, int32_t n_threads);

} // namespace pi
