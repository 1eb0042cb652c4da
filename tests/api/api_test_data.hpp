#pragma once
// The shared tokenizer vectors for the C API tests, which link only the public library.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <string>

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
