#pragma once

#include <string>

#include "options.hpp"
#include "powerinfer.h"
#include "summary.hpp"

namespace pi::bench {

// --parallel: n sequences decoded together, one token of each per pi_context_decode, against one
// sequence decoded alone in the same context (bench/README.md).
struct parallel_result {
    int n_sequences = 0;
    int n_prompt = 0; // prompt tokens of each sequence, decoded before the timed steps
    int n_gen = 0;    // tokens generated per sequence
    summary aggregate_tokens_per_second; // n_sequences * n_gen / seconds of the steps
    summary single_tokens_per_second;    // n_gen / seconds, one sequence alone
    double ratio() const;                // aggregate median / single median; NAN without a single
};

// `message` explains a failure (with pi_last_error()).
bool measure_parallel(pi_model* model, const options& o, parallel_result& out,
                      std::string& message);

} // namespace pi::bench
