#pragma once
// XTC ("exclude top choices", llama.cpp's): with the given probability, removes every token at
// least as likely as the threshold except the least likely of them.
#include <cstdint>
#include <random>

#include "sampling/token_candidates.hpp"

namespace pi {

// Draws from rng only when it can act: probability > 0, threshold <= 0.5 and two candidates.
void exclude_top_choices(candidate_list& list, float probability, float threshold, int32_t min_keep,
                         std::mt19937& rng);

} // namespace pi
