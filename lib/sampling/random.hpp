#pragma once
// The sampler's random numbers: only the raw output of std::mt19937, never a standard-library
// distribution, so that a seed gives the same tokens on every platform and standard library.
#include <random>

namespace pi {

// Uniform in [0, 1) from the generator's top 24 bits.
inline double uniform24(std::mt19937& rng) {
    return static_cast<double>(rng() >> 8) / static_cast<double>(1u << 24);
}

} // namespace pi
