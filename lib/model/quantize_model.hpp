#pragma once
// Model-level quantization (pi_model_quantize, pi-quantize): converts the 2-D weights of a F32 or
// F16 GGUF model to ggml formats and copies everything else, keeping the magic, the metadata
// order and the tensor order. Which weight gets which type follows PowerInfer's quantize
// (docs/quantization.md): one type for all with `pure`, otherwise its per-tensor mix.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "quant/types.hpp"

namespace pi {

namespace gguf {
class file;
struct tensor_info;
} // namespace gguf

// A quantization target, numbered as llama.cpp's llama_ftype (the value of general.file_type).
// The K-quant variants _S/_M/_L share a base type and differ in their mix.
enum class file_type : uint32_t {
    all_f32 = 0,
    mostly_f16 = 1,
    q4_0 = 2,
    q4_1 = 3,
    q8_0 = 7,
    q5_0 = 8,
    q5_1 = 9,
    q2_k = 10,
    q3_k_s = 11,
    q3_k_m = 12,
    q3_k_l = 13,
    q4_k_s = 14,
    q4_k_m = 15,
    q5_k_s = 16,
    q5_k_m = 17,
    q6_k = 18,
};

struct quantize_options {
    file_type target = file_type::q4_0;
    bool pure = false;           // every 2-D weight gets the target's type: no mix
    bool leave_output = false;   // output.weight copied unchanged (--leave-output-tensor)
    int n_threads = 0;           // <= 0: hardware threads; at most 1024
    bool keep_predictor = false; // leave fc1/fc2 at their input type
    // Called from the calling thread with progress in [0, 1]; returning false cancels.
    bool (*progress)(float progress, void* user_data) = nullptr;
    void* progress_user_data = nullptr;
};

// A target by PowerInfer's quantize name, case-insensitive: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16 F32
// Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K, and Q3_K, Q4_K, Q5_K for the _M
// variants. Throws pi::error(invalid_argument) naming the accepted names otherwise.
file_type parse_quantize_type(std::string_view name);

// The name parse_quantize_type reads (the _M form for the aliases), and the type most weights
// of that target get. Throw pi::error(invalid_argument) for a number that is not a target.
const char* file_type_name(file_type target);
ggml_type base_type(file_type target);

// What happens to one tensor: its output type (the input type means an unchanged copy) and, for
// a weight left unquantized because its rows do not split into blocks, a warning to log.
struct tensor_plan {
    ggml_type type;
    std::string warning;
};

// The plan of every tensor of f, in file order: 2-D tensors whose name ends in "weight" are
// quantized (except ffn_gate_inp, and output.weight with leave_output), others copied. Without
// options.pure, PowerInfer's mix (get_k_quant_type): output.weight Q6_K (Q8_0 for Falcon or rows
// not a multiple of 256, the target for Q8_0), fc1/fc2 Q4_0 for a Q4_0 target and Q5_0 otherwise,
// the K-quant rules for attn_v, attn_k, ffn_down, attn_output, attn_qkv, ffn_gate/ffn_up, and
// K-quants on rows that do not split into 256 replaced by a 32-element type. Throws
// pi::error(unsupported) for a weight that is already quantized (no requantizing).
std::vector<tensor_plan> plan_tensors(const gguf::file& f, const quantize_options& options);

// Reads in_path, writes out_path through a temporary file renamed into place, streaming: memory
// stays at about one chunk of one tensor whatever the model's size. Throws pi::error:
// invalid_argument when out_path is in_path (same file, also through links) or the target is
// not one, io/format for unreadable input or unwritable output, unsupported for quantized
// input weights, cancelled when the progress callback returns false (no output is left).
void quantize_model(const std::string& in_path, const std::string& out_path,
                    const quantize_options& options);

} // namespace pi
