#pragma once
// Model-level quantization (pi_model_quantize, pi-quantize): converts the 2-D weights of a F32 or
// F16 GGUF model to one ggml format and copies everything else, keeping the magic, the metadata
// order and the tensor order.
#include <cstdint>
#include <string>
#include <string_view>

#include "quant/types.hpp"

namespace pi {

namespace gguf {
struct tensor_info;
}

struct quantize_options {
    ggml_type type = ggml_type::q4_0; // F32, F16, Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0
    int n_threads = 0;                // <= 0: hardware threads; at most 1024
    bool keep_predictor = false;      // leave fc1/fc2 at their input type
    // Called from the calling thread with progress in [0, 1]; returning false cancels.
    bool (*progress)(float progress, void* user_data) = nullptr;
    void* progress_user_data = nullptr;
};

// A target of pi_model_quantize by name, case-insensitive ("q4_0"); throws
// pi::error(invalid_argument) naming the accepted names otherwise.
ggml_type parse_quantize_type(std::string_view name);

// general.file_type of a model quantized to `type` (llama.cpp's llama_ftype numbers).
uint32_t file_type_of(ggml_type type);

// What happens to one tensor: its output type (the input type means an unchanged copy) and, for
// a weight left unquantized because its rows do not split into blocks, a warning to log.
struct tensor_plan {
    ggml_type type;
    std::string warning;
};

// The rule (docs/quantization.md, like llama.cpp's quantize without k-quant mixes): 2-D tensors named
// "...weight" take the target type; the predictor's fc1/fc2 take Q4_0 for a Q4_0 target and
// Q5_0 otherwise, unless keep_predictor; 1-D tensors and integer tensors are copied. Throws
// pi::error(unsupported) for a weight that is already quantized (no requantizing).
tensor_plan plan_tensor(const gguf::tensor_info& tensor, const quantize_options& options);

// Reads in_path, writes out_path through a temporary file renamed into place, streaming: memory
// stays at about one chunk of one tensor whatever the model's size. Throws pi::error:
// invalid_argument when out_path is in_path (same file, also through links) or the type is not
// a target, io/format for unreadable input or unwritable output, unsupported for quantized
// input weights, cancelled when the progress callback returns false (no output is left).
void quantize_model(const std::string& in_path, const std::string& out_path,
                    const quantize_options& options);

} // namespace pi
