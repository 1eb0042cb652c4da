// pi-make-fuzz-seeds OUT_DIR: writes the seed corpus of each fuzz target into OUT_DIR/<target>/
// with the library's own writers (docs/fuzzing.md), so the seeds follow the formats as the code
// changes: the models of lib/synthetic (fuzz_models.hpp), states saved by the C API from them,
// grammars written by the JSON schema converter, and the chat formats' own names.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/torch_fixture.hpp"
#include "fuzz_models.hpp"
#include "model/quantize_model.hpp"
#include "planner/activation_stats.hpp"
#include "planner/gpu_index.hpp"
#include "seeds.hpp"
#include "support/error.hpp"
#include "synthetic/synthetic.hpp"

namespace fs = std::filesystem;

namespace pi::fuzz {

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out) pi::fail(pi::status::io, path.string(), ": cannot write");
}

void write_text(const fs::path& path, uint8_t mode, std::string_view text) {
    std::vector<uint8_t> bytes;
    bytes.reserve(1 + text.size());
    bytes.push_back(mode);
    bytes.insert(bytes.end(), text.begin(), text.end());
    write_bytes(path, bytes);
}

} // namespace pi::fuzz

namespace {

using pi::fuzz::tiny_model;
using pi::fuzz::write_bytes;
using pi::fuzz::write_text;

void write_model_seeds(const fs::path& dir, const std::string& vocab) {
    pi::write_synthetic_model(tiny_model("llama", true, vocab),
                              (dir / "llama-sparse.gguf").string());
    pi::write_synthetic_model(tiny_model("llama", false, vocab),
                              (dir / "llama-dense.gguf").string());
    pi::write_synthetic_model(tiny_model("bamboo", true, vocab),
                              (dir / "bamboo-sparse.gguf").string());
    pi::write_synthetic_model(tiny_model("falcon", true, vocab),
                              (dir / "falcon-sparse.gguf").string());
    pi::write_synthetic_model(tiny_model("opt", true, vocab), (dir / "opt-sparse.gguf").string());
    // Quantized weights, through pi-quantize's own code: a model whose rows split into blocks of
    // 32 (tiny_model's 16 columns would stay F16), at Q4_0 and Q8_0 for every weight, and at
    // Q4_K_M's mix, whose rows too short for super-blocks fall back to the 32-element types.
    pi::synth_options wide = tiny_model("llama", true, vocab);
    wide.n_embd = 32;
    wide.n_ff = 64;
    const std::string wide_path = (dir / "llama-sparse-32.gguf").string();
    pi::write_synthetic_model(wide, wide_path);
    const struct {
        const char* name;
        pi::file_type target;
        bool pure;
    } quantized[] = {{"q4_0", pi::file_type::q4_0, true},
                     {"q8_0", pi::file_type::q8_0, true},
                     {"q4_k_m", pi::file_type::q4_k_m, false}};
    for (const auto& q : quantized) {
        pi::quantize_options options;
        options.target = q.target;
        options.pure = q.pure;
        options.n_threads = 1;
        pi::quantize_model(
            wide_path, (dir / (std::string("llama-sparse-") + q.name + ".gguf")).string(), options);
    }
}

void write_gpu_index_seeds(const fs::path& dir) {
    pi::planner::gpu_index ours;
    ours.hot = {{0, 3, 5}, {1, 2, 31}};
    ours.n_ff = {32, 32};
    ours.vram_capacity = 4096;
    ours.fingerprint = "30000-0123456789abcdef";
    ours.budget = 8192;
    pi::planner::write_gpu_index((dir / "ours.gpuidx").string(), ours);
    pi::planner::gpu_index powerinfers = ours; // PowerInfer's files carry neither of our keys
    powerinfers.fingerprint.clear();
    powerinfers.budget.reset();
    pi::planner::write_gpu_index((dir / "powerinfer.gpuidx").string(), powerinfers);
}

void write_activation_seeds(const fs::path& dir) {
    pi::planner::activation_stats stats;
    stats.tokens = 1000;
    stats.counts = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    pi::planner::write_activation_stats((dir / "stats.gguf").string(), stats);
    write_bytes(dir / "f32.pt", pi::test::torch_file_f32({0.0f, 3.0f, 7.5f}));
    pi::test::torch_file_options old_torch;
    old_torch.version_first = true;
    old_torch.zip.zip64_end = false;
    write_bytes(dir / "i64.pt", pi::test::torch_file_i64({1, 2, 3}, old_torch));
    const std::vector<pi::test::fixture_tensor> tensors = {
        {"fc1.weight", "HalfStorage", "0", 12, 0, {3, 4}, {4, 1}},
        {"fc2.weight", "FloatStorage", "1", 2, 0, {2}, {1}}};
    write_bytes(dir / "state_dict.pt",
                pi::test::torch_zip(
                    pi::test::state_dict_pickle(tensors, true, true),
                    {{"0", std::vector<uint8_t>(24, 1)}, {"1", std::vector<uint8_t>(8, 2)}}));
}

void write_tokenizer_seeds(const fs::path& dir) {
    // Mode bits: 1 BPE, 2 GPT-2 rules (else Falcon's), 4 BOS, 8 parse_special, 16 decode.
    write_text(dir / "spm.txt", 0, "In the beginning God created the heaven and the earth.");
    write_text(dir / "spm-special.txt", 4 | 8, "<s>Hello</s> <unk> world\n\n  x");
    write_text(dir / "spm-invalid-utf8.txt", 0, "caf\xC3\xA9 \xE2\x82 \xFF\xFE \xF0\x9F\x98\x80");
    write_text(dir / "bpe-falcon.txt", 1 | 4, "Hello, World! It's 2024... \t\n  and then");
    write_text(dir / "bpe-gpt2.txt", 1 | 2, "they'll've  getting out 12345 \xE2\x82\xAC");
    write_text(dir / "bpe-special.txt", 1 | 8, "<|user|>the<|endoftext|>>>ABSTRACT<<in");
    write_text(dir / "bpe-invalid-utf8.txt", 1, "\x80\xC0\xAF\xED\xA0\x80 \xF4\x90\x80\x80");
    write_text(dir / "spm-decode.txt", 16, std::string_view("\x01\x00\x05\x01\x00\x0f\x02\x00", 8));
    write_text(dir / "bpe-decode.txt", 1 | 16, std::string_view("\x0a\x01\x41\x00\xff\xff", 6));
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const fs::path out = argv[1];
    try {
        for (const char* target :
             {"gguf_fuzz", "model_load_fuzz", "tokenizer_fuzz", "gpu_index_fuzz",
              "activation_stats_fuzz", "state_fuzz", "grammar_fuzz", "json_schema_fuzz",
              "chat_template_fuzz", "server_request_fuzz"}) {
            // Rewritten whole, so that a seed renamed here leaves no stale copy behind.
            fs::remove_all(out / target);
            fs::create_directories(out / target);
        }
        // The sparse Llama model is the one state_fuzz writes for itself, byte for byte.
        const std::string llama = pi::fuzz::write_tiny_llama((out / "gguf_fuzz").string());
        const std::string vocab = (out / "gguf_fuzz" / "vocab-tiny.gguf").string();
        write_model_seeds(out / "model_load_fuzz", vocab);
        write_gpu_index_seeds(out / "gpu_index_fuzz");
        write_activation_seeds(out / "activation_stats_fuzz");
        write_tokenizer_seeds(out / "tokenizer_fuzz");
        pi::fuzz::write_state_seeds(out / "state_fuzz", llama);
        pi::fuzz::write_grammar_seeds(out / "grammar_fuzz");
        pi::fuzz::write_json_schema_seeds(out / "json_schema_fuzz");
        pi::fuzz::write_chat_seeds(out / "chat_template_fuzz");
        pi::fuzz::write_server_request_seeds(out / "server_request_fuzz");
        // The GGUF reader's seeds: one file of each GGUF-based format (the vocabulary and the
        // model are there already).
        fs::copy_file(out / "gpu_index_fuzz" / "ours.gpuidx", out / "gguf_fuzz" / "index.gpuidx",
                      fs::copy_options::overwrite_existing);
        fs::copy_file(out / "activation_stats_fuzz" / "stats.gguf",
                      out / "gguf_fuzz" / "stats.gguf", fs::copy_options::overwrite_existing);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pi-make-fuzz-seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
