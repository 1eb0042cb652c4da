#pragma once
// The arenas of a context, shared by its host-side (context.cpp) and offload-side
// (context_offload.cpp) halves.
#include <vector>

#include "engine/context.hpp"

namespace pi {

// Views of every activation tensor of one arena (the host's or the offload device's), each sized
// for n_batch rows. Tensors an arena does not need keep ne1 == 0.
struct context::arena_layout {
    pib_tensor ids, pos, out_rows, kv_pos, count, all_count;
    pib_tensor x, xn, q, k, v, att, tmp;
    pib_buffer* mem = nullptr;
    size_t z_offset = 0;
    pib_tensor p, idx, all_idx, u, g;
    pib_tensor xo, logits;
    pib_tensor audit_up, audit_gate; // dense FFN activations for the predictor audit
    pib_tensor hot_idx, hot_count, hot_up, hot_gate, partial; // the device half of a hybrid FFN
    std::vector<pib_tensor> k_cache, v_cache;
    size_t size = 0;
};

// What an arena holds besides the activations every block needs.
struct context::arena_spec {
    int64_t n_batch = 1;
    int64_t n_ctx = 1; // host only: cells of kv_pos
    bool host = true;  // token ids, dense FFN and the all-neuron lists live on the host only
    bool audit = false;
    int64_t max_hot = 0;     // device only, > 0: the hybrid FFN's tensors for this many neurons
    int64_t logits_rows = 1; // output rows computed at once
};

} // namespace pi
