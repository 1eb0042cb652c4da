#pragma once
// The tiny models of the fuzz targets and of pi-make-fuzz-seeds: a 320-token cut of the
// fixture's SPM vocabulary and a 16-wide geometry keep each file near 30 KB, and libFuzzer
// mutates small inputs much faster. The writers are deterministic, so a target that writes a
// model for itself gets the bytes the seeds were made with (a saved state names its model by a
// hash of them).
#include <string>

#include "synthetic/synthetic.hpp"

namespace pi::fuzz {

// The fixture vocabulary's tokenizer keys with every per-token array cut to the first tokens:
// <unk>, <s>, </s>, the 256 byte tokens and the first merges.
void write_tiny_vocab(const std::string& path);

pi::synth_options tiny_model(const std::string& arch, bool sparse, const std::string& vocab);

// Writes dir/vocab-tiny.gguf and the sparse Llama model dir/llama-sparse.gguf made of it;
// returns the model's path.
std::string write_tiny_llama(const std::string& dir);

} // namespace pi::fuzz
