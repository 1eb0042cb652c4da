#pragma once
// Every knob of the sampler chain, with llama.cpp's defaults (docs/sampling.md).
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/logit_bias.hpp"

namespace pi {

// The reorderable stages; the values are the C API's pi_sampler_stage.
enum class sampler_stage : int32_t {
    penalties = 0,
    dry = 1,
    top_k = 2,
    typical = 3,
    top_p = 4,
    min_p = 5,
    xtc = 6,
    temperature = 7,
};
inline constexpr int32_t n_sampler_stages = 8;

std::vector<sampler_stage> default_stage_order();
const char* stage_name(sampler_stage s);

// The scalar knobs, apart from the lists so that their defaults are read without allocating
// (pi_sampler_params_init must not fail, docs/robustness.md).
struct sampler_scalars {
    float temperature = 0.8f; // <= 0: greedy pick
    int32_t top_k = 40;       // <= 0: off
    float top_p = 0.95f;      // in (0, 1]; 1: off
    uint32_t seed = 0;
    float min_p = 0.05f;         // in [0, 1]; 0: off
    float typical_p = 1.0f;      // in (0, 1]; 1: off
    float dynatemp_range = 0.0f; // 0: off
    float dynatemp_exponent = 1.0f;
    int32_t penalty_last_n = 64; // 0: off; -1: every accepted token
    float repeat_penalty = 1.0f; // > 0; 1: off
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    float dry_multiplier = 0.0f; // 0: off
    float dry_base = 1.75f;      // >= 1
    int32_t dry_allowed_length = 2;
    int32_t dry_penalty_last_n = -1; // 0: off; -1: every accepted token
    float xtc_probability = 0.0f; // 0: off
    float xtc_threshold = 0.1f;
    int32_t mirostat = 0; // 0: off, 1 or 2: that version (then only penalties and temperature run)
    float mirostat_tau = 5.0f;
    float mirostat_eta = 0.1f;
    int32_t min_keep = 0; // the least the truncating stages keep (besides the one always kept)
};

struct sampler_options : sampler_scalars {
    std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
    std::vector<logit_bias> logit_biases;
    std::vector<sampler_stage> stages = default_stage_order();
    // What the constraint was built from (e.g. the grammar's text and root): a saved state loads
    // only into a sampler whose constraint was built from the same.
    std::string constraint_source;
};

// Throws pi::error(invalid_argument) naming the first bad field. n_vocab is the vocabulary size,
// 0 when the sampler has no model: then logit biases and DRY with sequence breakers are refused.
void validate(const sampler_options& o, int32_t n_vocab);

} // namespace pi
