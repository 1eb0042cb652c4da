#pragma once
// Shared helpers of the C++ tests.
#include <functional>
#include <string>

#include "support/error.hpp"

namespace pi::test {

// The status and the message of the pi::error a call throws (status::ok and "" when it throws
// none).
status code_of(const std::function<void()>& f);
std::string message_of(const std::function<void()>& f);

// Folder of the Llama and Falcon tokenizer vectors, which the repository does not hold
// (docs/test-data.md): env PI_TEST_DATA, else the CMake cache value POWERINFER_TEST_DATA_DIR.
std::string vector_data_dir();
// True when vector_data_dir() holds `file`. When it does not: under CI=true the calling test
// fails, otherwise it is reported as skipped (doctest MESSAGE) and the caller returns.
bool require_vector_file(const std::string& file);
// The really-trained fixture's vocabulary-only GGUF, tests/data/relu-llama-kjv.vocab.gguf
// (4096 SentencePiece tokens, docs/fixture.md): always present.
std::string fixture_vocab_path();
// A fresh, empty scratch folder for the calling test, under the build tree.
std::string scratch_dir(const std::string& name);

} // namespace pi::test

#include <functional>

#include "gguf/gguf.hpp"
#include "synthetic/synthetic.hpp"

namespace pi::test {

// Options for a tiny synthetic model over the fixture's vocabulary (n_embd 64, 2 layers).
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
