#pragma once
// Validation of the writer's options and the sizes that follow from them.
#include <cstdint>
#include <utility>

#include "support/error.hpp"
#include "synthetic/synthetic.hpp"

namespace pi::synth {

struct geometry {
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_embd_kv, n_vocab;
    int64_t rank0; // rows of the gate's low-rank factor A; the predictor has 2·(rank0+1) rows
};

template <typename... Parts> [[noreturn]] void bad_option(Parts&&... parts) {
    fail(status::invalid_argument, "synthetic model: ", std::forward<Parts>(parts)...);
}

// Throws pi::error(invalid_argument) naming the first bad option.
void validate(const synth_options& o);

geometry make_geometry(const synth_options& o, int64_t n_vocab);

// Rejects sizes whose element counts could overflow the arithmetic of the construction; memory
// for anything smaller is the caller's concern (allocation failure surfaces as std::bad_alloc).
void check_size(const geometry& g, const synth_options& o);

} // namespace pi::synth
