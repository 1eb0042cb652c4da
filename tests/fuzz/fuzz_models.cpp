#include "fuzz_models.hpp"

#include <variant>

#include "gguf/gguf.hpp"

namespace pi::fuzz {

namespace {
constexpr size_t tiny_vocab_tokens = 320;
} // namespace

void write_tiny_vocab(const std::string& path) {
    const auto full = pi::gguf::file::open(PI_FUZZ_SPM_VOCAB);
    const size_t n_full = full->get_string_array("tokenizer.ggml.tokens").size();
    pi::gguf::writer w(false);
    for (auto [key, v] : full->metadata()) {
        if (auto* arr = std::get_if<pi::gguf::array_value>(&v.data); arr && arr->size() == n_full)
            *arr = arr->first(tiny_vocab_tokens);
        w.set(key, std::move(v));
    }
    w.write(path);
}

pi::synth_options tiny_model(const std::string& arch, bool sparse, const std::string& vocab) {
    pi::synth_options o;
    o.arch = arch;
    o.n_embd = 16;
    o.n_layer = 2;
    o.n_head = 2;
    o.n_head_kv = arch == "opt" ? 2 : 1;
    o.n_ff = 32;
    o.n_ctx_train = 64; // OPT's calibration needs 32 learned positions
    o.weight_type = pi::ggml_type::f16;
    o.sparse = sparse;
    o.seed = 3;
    o.vocab_path = vocab;
    return o;
}

std::string write_tiny_llama(const std::string& dir) {
    const std::string vocab = dir + "/vocab-tiny.gguf";
    const std::string model = dir + "/llama-sparse.gguf";
    write_tiny_vocab(vocab);
    pi::write_synthetic_model(tiny_model("llama", true, vocab), model);
    return model;
}

} // namespace pi::fuzz
