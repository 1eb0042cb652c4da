#pragma once
// The shared tokenizer vectors for the C API tests, which link only the public library.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "powerinfer.h"

// A file of the shared test data: env PI_TEST_DATA, else the CMake cache value.
inline std::string data_file(const char* name) {
    const char* env = std::getenv("PI_TEST_DATA");
    return std::string(env && *env ? env : PI_TEST_DATA_DIR) + "/" + name;
}

// True when the Llama vocabulary is there; otherwise the test fails under CI=true and reports
// itself skipped elsewhere.
inline bool have_vocab() {
    std::ifstream f(data_file("ggml-vocab-llama-spm.gguf"));
    if (f) return true;
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL("shared test data missing under CI");
    MESSAGE("SKIPPED: shared test data not found");
    return false;
}

// Writes a tiny synthetic sparse model (n_embd 64, 2 layers, 4 query and 2 KV heads, n_ff 176)
// over the shared Llama vocabulary to `out`.
inline void write_tiny_model(const std::string& out, uint64_t seed, float predictor_noise = 0.0f) {
    const std::string vocab = data_file("ggml-vocab-llama-spm.gguf");
    pi_synth_params p = pi_synth_default_params();
    p.n_embd = 64;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 176;
    p.seed = seed;
    p.predictor_noise = predictor_noise;
    p.vocab_path = vocab.c_str();
    REQUIRE(pi_synth_model_write(&p, out.c_str()) == PI_OK);
}
