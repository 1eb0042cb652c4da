#pragma once
// Synthetic PowerInfer-format models with realistic activation sparsity (docs/synthetic-models.md).
#include <cstdint>
#include <string>

#include "quant/types.hpp"

namespace pi {

struct synth_options {
    // The family (docs/synthetic-models.md, "Families"): "llama" (also "llama-relu"; ReGLU),
    // "prosparse" (arch llama), "bamboo" (relu(gate)*relu(up)), "falcon" (7B-style),
    // "falcon-40b" (with attn_norm_2), "opt".
    std::string arch = "llama";
    int32_t n_embd = 256;
    int32_t n_layer = 2;
    int32_t n_head = 8;
    int32_t n_head_kv = 8;
    int32_t n_ff = 688;
    int32_t n_ctx_train = 2048;
    int32_t predictor_rank = 0;             // 0 = chosen by the construction
    ggml_type weight_type = ggml_type::f32; // F32 or F16 for 2-D weights; norms stay F32
    bool sparse = true;           // true: PWRI + ffn_down_t + fc1/fc2; false: GGUF + ffn_down
    bool dense_relu = true;       // dense files: write powerinfer.ffn_activation = "relu"
    float sparsity = 0.90f;       // target fraction of FFN neurons inactive per token
    float power_law = 1.0f;       // skew of per-neuron firing frequency (0 = uniform)
    float predictor_noise = 0.0f; // 0 = exact predictor; > 0 perturbs it (recall drops)
    float rms_eps = 1e-5f;        // the RMSNorm or LayerNorm epsilon
    float rope_freq_base = 10000.0f;
    uint64_t seed = 1;
    std::string vocab_path; // vocab-only GGUF whose tokenizer.* keys are copied
};

// Writes the model; throws pi::error naming the bad option or the I/O failure.
void write_synthetic_model(const synth_options& options, const std::string& out_path);

} // namespace pi
