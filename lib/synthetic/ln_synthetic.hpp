#pragma once
// The LayerNorm families (falcon, falcon-40b, opt), built and calibrated layer by layer by the
// writer's own forward pass (docs/synthetic-models.md, "The LayerNorm families").
#include "gguf/gguf.hpp"
#include "synthetic/family.hpp"
#include "synthetic/options.hpp"

namespace pi::synth {

// Adds every tensor of the model to `w`, in file order.
void add_ln_tensors(gguf::writer& w, const family_traits& f, const synth_options& o,
                    const geometry& g);

} // namespace pi::synth
