#pragma once
// How often each FFN neuron fires, and the gate bias that makes it fire that often
// (docs/synthetic-models.md, "Firing rates" and "Choosing the biases").
#include <cstdint>
#include <vector>

#include "synthetic/matrix.hpp"
#include "synthetic/random.hpp"

namespace pi::synth {

// Firing rate of each neuron: min(cap, c·(k+1)^-power_law) for rank k, with c chosen so that
// the mean is `mean_rate`; ranks are shuffled over the neurons by `r`.
std::vector<double> firing_rates(int64_t n_ff, double mean_rate, double power_law, rng r);

// Inverse of the standard normal CDF, clamped to the bias bound of ±8.
double normal_quantile(double p);

// b_i = -(mean_i + std_i·z_i)/(w0·C) with z_i = Φ⁻¹(1 - rate_i): under a normal fit of the
// calibration values s[·][i] (one row per token), the neuron then fires on a fraction rate_i
// of tokens. Biases are rounded to F16.
std::vector<float> gate_biases(const matrix& s, const std::vector<double>& rates, double w0c);

} // namespace pi::synth
