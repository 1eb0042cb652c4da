#pragma once
// The repository's vocabulary for the C API tests, which link only the public library.
#include <doctest/doctest.h>

#include <string>

#include "powerinfer.h"

// The parameters of a tiny synthetic sparse model (n_embd 64, 2 layers, 4 query and 2 KV heads,
// n_ff 176) over the fixture's vocabulary (tests/data/relu-llama-kjv.vocab.gguf, docs/fixture.md);
// write_tiny_model writes one to `out`.
inline pi_synth_params tiny_model_params(uint64_t seed, float predictor_noise = 0.0f) {
    pi_synth_params p = pi_synth_default_params();
    p.n_embd = 64;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 176;
    p.seed = seed;
    p.predictor_noise = predictor_noise;
    p.vocab_path = PI_TEST_FIXTURE_VOCAB;
    return p;
}

inline void write_tiny_model(const std::string& out, uint64_t seed, float predictor_noise = 0.0f) {
    const pi_synth_params p = tiny_model_params(seed, predictor_noise);
    REQUIRE(pi_synth_model_write(&p, out.c_str()) == PI_OK);
}
