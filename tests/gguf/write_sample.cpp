// Writes the sample files that check_with_gguf_py.py reads with gguf-py:
// <dir>/dense.gguf (magic GGUF, alignment 32) and <dir>/sparse.gguf (magic PWRI, alignment 64).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "quant/types.hpp"
#include "support/error.hpp"

namespace {

using namespace pi;
using gguf::value;
using gguf::value_type;

template <typename T> std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(T));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

// Values the Python script expects; keep the two files in step.
void write_sample(const std::string& path, bool sparse, uint32_t alignment) {
    gguf::writer w(sparse, alignment);
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", "sample \xe2\x96\x81 model");
    w.set("test.u8", value{value_type::u8, uint64_t{200}});
    w.set("test.i8", value{value_type::i8, int64_t{-100}});
    w.set("test.u16", value{value_type::u16, uint64_t{60000}});
    w.set("test.i16", value{value_type::i16, int64_t{-30000}});
    w.set_u32("llama.block_count", 2);
    w.set_i32("test.i32", -123456);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_bool("test.bool", true);
    w.set_u64("test.u64", 1ull << 40);
    w.set("test.i64", value{value_type::i64, int64_t{-(1ll << 40)}});
    w.set("test.f64", value{value_type::f64, 0.125});
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81hi"});
    const float scores[] = {0.f, -1.f, -2.f, -3.5f};
    w.set_f32_array("tokenizer.ggml.scores", scores);
    const int32_t types[] = {2, 3, 3, 1};
    w.set_i32_array("tokenizer.ggml.token_type", types);
    if (sparse) w.set_f32("powerinfer.sparse_threshold", 0.5f);

    std::vector<float> embd(4 * 3);
    for (size_t i = 0; i < embd.size(); ++i)
        embd[i] = 0.5f * static_cast<float>(i) - 1.f;
    const int64_t d_embd[] = {4, 3};
    w.add_tensor("token_embd.weight", ggml_type::f32, d_embd, as_bytes(embd));

    std::vector<uint16_t> norm(8);
    for (size_t i = 0; i < norm.size(); ++i)
        norm[i] = fp32_to_fp16(0.25f * static_cast<float>(i));
    const int64_t d_norm[] = {8};
    w.add_tensor("output_norm.weight", ggml_type::f16, d_norm, as_bytes(norm));

    std::vector<uint8_t> q(2 * 34);
    for (size_t i = 0; i < q.size(); ++i)
        q[i] = static_cast<uint8_t>(i * 3);
    const int64_t d_q[] = {32, 2};
    w.add_tensor("blk.0.ffn_up.weight", ggml_type::q8_0, d_q, q);

    // No I8/I16/I32 tensor: current gguf-py renumbered those ids (16..18 are IQ quants there).
    std::vector<uint8_t> k(144);
    for (size_t i = 0; i < k.size(); ++i)
        k[i] = static_cast<uint8_t>(255 - i);
    const int64_t d_k[] = {256, 1};
    w.add_tensor("blk.0.ffn_gate.weight", ggml_type::q4_k, d_k, k);
    w.write(path);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    try {
        write_sample(std::string(argv[1]) + "/dense.gguf", false, 32);
        write_sample(std::string(argv[1]) + "/sparse.gguf", true, 64);
    } catch (const pi::error& e) {
        std::fprintf(stderr, "gguf_write_sample: %s\n", e.what());
        return 1;
    }
    return 0;
}
