#include "model/arch.hpp"

#include <array>

namespace pi {

namespace {
constexpr std::string_view rms_eps_key = "attention.layer_norm_rms_epsilon";
constexpr std::string_view layer_eps_key = "attention.layer_norm_epsilon";

// llama dense files default to SwiGLU (as llama.cpp and PowerInfer run them); bamboo is ReLU
// in both modes. Falcon's and OPT's FFNs have no gate: relu(up · x) in both modes. OPT's ε
// defaults to Hugging Face's 1e-5 where PowerInfer reads none.
constexpr std::array<arch_desc, 4> archs = {{
    {"llama", PIB_GLU_RELU, PIB_GLU_SILU, true, true, PIB_ROPE_NORMAL, norm_kind::rms,
     block_kind::sequential, false, false, false, true, rms_eps_key, -1.0f},
    {"bamboo", PIB_GLU_RELU_RELU, PIB_GLU_RELU_RELU, true, true, PIB_ROPE_NORMAL, norm_kind::rms,
     block_kind::sequential, false, false, false, true, rms_eps_key, -1.0f},
    {"falcon", PIB_GLU_RELU, PIB_GLU_RELU, false, true, PIB_ROPE_NEOX, norm_kind::layer,
     block_kind::parallel, true, false, false, false, layer_eps_key, 1e-5f},
    {"opt", PIB_GLU_RELU, PIB_GLU_RELU, false, false, PIB_ROPE_NORMAL, norm_kind::layer,
     block_kind::sequential, false, true, true, true, layer_eps_key, 1e-5f},
}};
} // namespace

const arch_desc* find_arch(std::string_view name) noexcept {
    for (const arch_desc& a : archs)
        if (a.name == name) return &a;
    return nullptr;
}

bool offload_capable(const arch_desc& a) noexcept {
    return a.norm == norm_kind::rms && a.block == block_kind::sequential && !a.biases &&
           a.gated_ffn && !a.learned_positions;
}

const char* supported_arch_names() noexcept { return "llama, bamboo, falcon, opt"; }

} // namespace pi
