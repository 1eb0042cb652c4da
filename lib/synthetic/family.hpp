#pragma once
// The model families the writer builds and what distinguishes them in the file
// (docs/synthetic-models.md, "Families").
#include <string>

namespace pi::synth {

enum class family { llama, prosparse, bamboo, falcon, falcon_40b, opt };

struct family_traits {
    family id;
    const char* name;      // the option's spelling, also in general.name
    const char* file_arch; // general.architecture
    bool gate;             // ffn_gate exists (llama-style GLU); otherwise relu(up·x [+ b])
    bool layer_norm;       // LayerNorm with biases instead of RMSNorm (falcon, opt)
};

// Throws pi::error(invalid_argument) for a name that is none of the families; "llama-relu" is
// accepted as another name of "llama".
const family_traits& family_named(const std::string& name);

} // namespace pi::synth
