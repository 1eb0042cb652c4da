#pragma once
// Architecture registry: what differs between the model families this engine runs
// (docs/forward-pass.md).
#include <string_view>

#include "pib_backend.h"

namespace pi {

enum class norm_kind { rms, layer };    // RMSNorm, or LayerNorm with a bias
enum class block_kind { sequential, parallel }; // parallel: attention and FFN read the layer input

struct arch_desc {
    std::string_view name;
    pib_glu_kind sparse_glu;        // FFN activation of sparse (PowerInfer) files, gated FFNs
    pib_glu_kind dense_default_glu; // of dense files without our relu marker
    bool gated_ffn;                 // ffn_gate exists; otherwise a_i = relu(up_i · x (+ b_i))
    bool uses_rope;
    pib_rope_mode rope_mode;
    norm_kind norm;
    block_kind block;
    bool fused_qkv;          // one attn_qkv tensor: all Q heads, then K heads, then V heads
    bool biases;             // every projection and norm has a .bias tensor
    bool learned_positions;  // position_embd[pos + 2] added to the token embedding
    bool ffn_norm;           // a separate norm before the FFN (not Falcon's shared one)
    std::string_view eps_key; // {arch}.<eps_key>
    float default_eps;       // < 0: the key is required
};

// Whether the offload device half (device_half.cpp, offload.cpp) runs this architecture's layers:
// so far the RMSNorm, gated, bias-free sequential blocks only.
bool offload_capable(const arch_desc& a) noexcept;

// nullptr for an architecture this build cannot run.
const arch_desc* find_arch(std::string_view name) noexcept;

// Comma-separated names, for error messages.
const char* supported_arch_names() noexcept;

} // namespace pi
