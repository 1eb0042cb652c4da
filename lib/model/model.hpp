#pragma once
// A loaded model: hyper-parameters, tokenizer and views of every weight in a backend buffer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.hpp"
#include "model/arch.hpp"

namespace pi {

namespace gguf {
class file;
}
class tokenizer;

enum class ffn_activation_choice { from_file, relu, silu };

struct load_options {
    bool use_mmap = true;
    ffn_activation_choice activation = ffn_activation_choice::from_file;
    bool force_dense = false;          // compute every neuron even in a sparse file
    bool override_threshold = false;
    float sparse_threshold = 0.0f;
    // Returns false to cancel; progress in [0, 1].
    bool (*progress)(float progress, void* user_data) = nullptr;
    void* progress_user_data = nullptr;
};

struct hparams {
    const arch_desc* arch = nullptr;
    int32_t n_vocab = 0;
    int32_t n_ctx_train = 0;
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t n_ff = 0;
    int32_t head_dim = 0;
    int32_t n_rot = 0;
    float norm_eps = 1e-5f;  // RMSNorm's or LayerNorm's ε, as the architecture reads it
    int32_t n_positions = 0; // learned position rows usable (position_embd rows - 2); 0: no limit
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;

    int32_t n_embd_kv() const noexcept { return n_head_kv * head_dim; }
};

// A tensor a file may lack (biases, Falcon-40B's second norm, OPT's untied output) is all zeros.
inline bool present(const pib_tensor& t) noexcept { return t.ne0 > 0; }

struct layer_weights {
    pib_tensor attn_norm, wq, wk, wv, wo; // Falcon: wq, wk, wv are row ranges of attn_qkv
    pib_tensor ffn_norm, gate, up;        // Falcon: no ffn_norm; Falcon and OPT: no gate
    pib_tensor down;   // dense files: [n_ff, n_embd]
    pib_tensor down_t; // sparse files: [n_embd, n_ff], row i = neuron i
    pib_tensor fc1, fc2;
    pib_tensor attn_norm_b, attn_norm_2, attn_norm_2_b; // Falcon-40B: attn_norm_2 feeds attention
    pib_tensor bq, bk, bv, bo, ffn_norm_b, up_b, down_b; // OPT's biases
    int32_t predictor_rank = 0;
};

class model {
public:
    static std::unique_ptr<model> load(const std::string& path, const load_options& options);
    ~model();

    const hparams& hp() const noexcept { return hp_; }
    const tokenizer& vocab() const noexcept { return *tokenizer_; }
    const gguf::file& file() const noexcept { return *file_; }
    bool sparse_file() const noexcept { return sparse_file_; }
    bool sparse_inference() const noexcept { return sparse_inference_; }
    float sparse_threshold() const noexcept { return threshold_; }
    pib_glu_kind glu() const noexcept { return glu_; }
    const std::string& name() const noexcept { return name_; }
    uint64_t n_params() const noexcept { return n_params_; }
    ggml_type ffn_type() const noexcept { return ffn_type_; }

    const pib_tensor& token_embd() const noexcept { return token_embd_; }
    const pib_tensor& output_norm() const noexcept { return output_norm_; }
    const pib_tensor& output() const noexcept { return output_; } // token_embd when tied
    const pib_tensor& output_norm_bias() const noexcept { return output_norm_b_; }
    const pib_tensor& position_embd() const noexcept { return position_embd_; }
    const std::vector<layer_weights>& layers() const noexcept { return layers_; }
    int32_t max_predictor_rank() const noexcept;
    const device& host_device() const noexcept { return *host_; } // owns the weights buffer

private:
    model();
    void read_hparams();
    void bind_tensors(const load_options& options);
    pib_tensor bind(const std::string& name, int64_t ne0, int64_t ne1);
    pib_tensor bind_optional(const std::string& name, int64_t ne0, int64_t ne1);
    pib_tensor bind_norm(const std::string& name, int64_t n);           // F32 only
    pib_tensor bind_norm_optional(const std::string& name, int64_t n);
    void bind_attention(layer_weights& l, const std::string& prefix);
    void bind_ffn(layer_weights& l, const std::string& prefix);

    std::unique_ptr<gguf::file> file_;
    std::unique_ptr<tokenizer> tokenizer_;
    std::unique_ptr<device> host_;   // owns the weights buffer (a CPU backend instance)
    buffer weights_; // wraps the file's bytes, mapped or read into memory (use_mmap = false)

    hparams hp_;
    std::string name_;
    bool sparse_file_ = false;
    bool sparse_inference_ = false;
    float threshold_ = 0.0f;
    pib_glu_kind glu_ = PIB_GLU_RELU;
    uint64_t n_params_ = 0;
    ggml_type ffn_type_ = ggml_type::f32;
    uint64_t weight_types_ = 0; // PIB_TYPE_BIT of each type the host backend computes
    pib_tensor token_embd_{}, output_norm_{}, output_{}, output_norm_b_{}, position_embd_{};
    std::vector<layer_weights> layers_;
};

} // namespace pi
