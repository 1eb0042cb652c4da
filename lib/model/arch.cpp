#include "model/arch.hpp"

#include <array>

namespace pi {

namespace {
// llama dense files default to SwiGLU (as llama.cpp and PowerInfer run them); bamboo is ReLU
// in both modes (docs/forward-pass.md).
constexpr std::array<arch_desc, 2> archs = {{
    {"llama", PIB_GLU_RELU, PIB_GLU_SILU, PIB_ROPE_NORMAL},
    {"bamboo", PIB_GLU_RELU_RELU, PIB_GLU_RELU_RELU, PIB_ROPE_NORMAL},
}};
} // namespace

const arch_desc* find_arch(std::string_view name) noexcept {
    for (const arch_desc& a : archs)
        if (a.name == name) return &a;
    return nullptr;
}

const char* supported_arch_names() noexcept { return "llama, bamboo"; }

} // namespace pi
