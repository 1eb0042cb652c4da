#pragma once
// Deterministic randomness of the synthetic-model writer: the same bits on every platform, and
// one independent stream per (seed, layer, tensor) (docs/synthetic-models.md, "Determinism").
#include <array>
#include <cstdint>

namespace pi::synth {

uint64_t splitmix64(uint64_t& state);

// xoshiro256** with Box-Muller normals; std::normal_distribution is not used because the
// standard leaves its algorithm to the library.
class rng {
  public:
    explicit rng(uint64_t seed);

    uint64_t next();
    double uniform(); // [0, 1)
    double normal();
    float sign();               // +1 or -1 with equal probability
    uint64_t below(uint64_t n); // uniform in [0, n), n > 0

  private:
    std::array<uint64_t, 4> s_{};
    double spare_ = 0.0;
    bool has_spare_ = false;
};

// Every tensor draws from its own stream, so that changing one knob (say predictor_noise or
// sparse/dense) leaves every other tensor's random numbers unchanged.
enum class stream : uint64_t {
    token_embd = 1,
    calibration_tokens,
    attn_norm,
    attn_q,
    attn_k,
    attn_v,
    attn_output,
    ffn_norm,
    predictor_a,
    predictor_b,
    firing_rates,
    ffn_up,
    ffn_down,
    predictor_noise,
    output_norm,
    output,
    // The LayerNorm families' own tensors (appended: the streams above keep their keys).
    attn_norm_bias,
    attn_norm_2,
    attn_norm_2_bias,
    ffn_norm_bias,
    attn_q_bias,
    attn_k_bias,
    attn_v_bias,
    attn_output_bias,
    ffn_down_bias,
    position_embd,
    output_norm_bias,
    output_norm_sign,
};

// layer -1 is for the tensors outside the blocks.
rng stream_rng(uint64_t seed, int64_t layer, stream which);

} // namespace pi::synth
