#pragma once
// Shared helpers of the C++ tests.
#include <string>

namespace pi::test {

// Folder of the shared tokenizer vectors: env PI_TEST_DATA, else the CMake cache value.
std::string data_dir();
// True when data_dir() holds `file`. When it does not: under CI=true the calling test fails,
// otherwise it is reported as skipped (doctest MESSAGE) and the caller returns.
bool require_data_file(const std::string& file);
// A fresh, empty scratch folder for the calling test, under the build tree.
std::string scratch_dir(const std::string& name);

} // namespace pi::test

#include <functional>

#include "gguf/gguf.hpp"
#include "model/synthetic.hpp"

namespace pi::test {

// Options for a tiny synthetic model over the shared Llama vocabulary (n_embd 64, 2 layers).
synth_options tiny_model_options(bool sparse = true);
// Writes a tiny model into `dir` (cached by file name within one test run) and returns its path.
std::string write_tiny_model(const std::string& dir, const std::string& name, const synth_options& o);

// Copies a GGUF file through the writer, letting `edit` change metadata or tensors first.
struct model_edit {
    std::vector<std::pair<std::string, gguf::value>> kv;
    struct tensor {
        std::string name;
        ggml_type type;
        std::vector<int64_t> dims;
        std::vector<uint8_t> data;
    };
    std::vector<tensor> tensors;
    bool sparse = false;
};
std::string rewrite_model(const std::string& src, const std::string& dst,
                          const std::function<void(model_edit&)>& edit);

} // namespace pi::test
