#include "synthetic/random.hpp"

#include <cmath>
#include <numbers>

namespace pi::synth {
namespace {

uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

} // namespace

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

rng::rng(uint64_t seed) {
    for (auto& word : s_)
        word = splitmix64(seed);
}

uint64_t rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double rng::uniform() {
    return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double rng::normal() {
    if (has_spare_) {
        has_spare_ = false;
        return spare_;
    }
    const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));
    const double angle = 2.0 * std::numbers::pi * uniform();
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
}

float rng::sign() {
    return (next() >> 63) != 0 ? 1.0f : -1.0f;
}

uint64_t rng::below(uint64_t n) {
    // Rejecting the top partial range keeps every residue equally likely.
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x = next();
    while (x >= limit)
        x = next();
    return x % n;
}

rng stream_rng(uint64_t seed, int64_t layer, stream which) {
    uint64_t key = (static_cast<uint64_t>(layer + 1) << 16) | static_cast<uint64_t>(which);
    return rng(seed ^ splitmix64(key));
}

} // namespace pi::synth
