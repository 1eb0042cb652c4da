#include "model/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "gguf/gguf.hpp"
#include "support/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {

namespace {

// LLAMA_SPARSE_PRED_THRESHOLD overrides the file's threshold, as in PowerInfer (docs/forward-pass.md).
bool env_threshold(float& out) {
    const char* env = std::getenv("LLAMA_SPARSE_PRED_THRESHOLD");
    if (!env || !*env) return false;
    char* end = nullptr;
    const float v = std::strtof(env, &end);
    if (end == env || *end != '\0' || !std::isfinite(v)) {
        log(log_level::warn, concat("ignoring LLAMA_SPARSE_PRED_THRESHOLD='", env, "': not a number"));
        return false;
    }
    out = v;
    return true;
}

// Without mmap the file is read whole into memory, which is the first 90% of the progress.
gguf::open_options open_options_of(const load_options& options) {
    gguf::open_options how;
    how.in_memory = !options.use_mmap;
    if (options.progress) {
        how.progress.fn = [](float fraction, void* user_data) {
            const auto* o = static_cast<const load_options*>(user_data);
            return o->progress(0.9f * fraction, o->progress_user_data);
        };
        how.progress.user_data = const_cast<load_options*>(&options);
    }
    return how;
}

} // namespace

model::model() = default;
model::~model() = default;

int32_t model::max_predictor_rank() const noexcept {
    int32_t r = 0;
    for (const layer_weights& l : layers_) r = std::max(r, l.predictor_rank);
    return r;
}

std::unique_ptr<model> model::load(const std::string& path, const load_options& options) {
    std::unique_ptr<model> m(new model());
    m->file_ = gguf::file::open(path, open_options_of(options));
    m->read_hparams();
    m->tokenizer_ = tokenizer::from_gguf(*m->file_);
    m->bind_tensors(options);
    return m;
}

void model::read_hparams() {
    const gguf::file& f = *file_;
    const std::string arch_name = f.get_string("general.architecture");
    hp_.arch = find_arch(arch_name);
    if (!hp_.arch)
        fail(status::unsupported, f.path(), ": architecture '", arch_name,
             "' is not supported (supported: ", supported_arch_names(), ")");
    name_ = f.get_string("general.name", "");
    const std::string a = arch_name + ".";
    hp_.n_ctx_train = static_cast<int32_t>(f.get_u32(a + "context_length"));
    hp_.n_embd = static_cast<int32_t>(f.get_u32(a + "embedding_length"));
    hp_.n_layer = static_cast<int32_t>(f.get_u32(a + "block_count"));
    hp_.n_ff = static_cast<int32_t>(f.get_u32(a + "feed_forward_length"));
    hp_.n_head = static_cast<int32_t>(f.get_u32(a + "attention.head_count"));
    hp_.n_head_kv = static_cast<int32_t>(f.get_u32(a + "attention.head_count_kv", static_cast<uint32_t>(hp_.n_head)));
    const std::string eps_key = a + std::string(hp_.arch->eps_key);
    hp_.norm_eps = hp_.arch->default_eps < 0.0f || f.find(eps_key)
                       ? f.get_f32(eps_key)
                       : hp_.arch->default_eps;
    hp_.rope_freq_base = f.get_f32(a + "rope.freq_base", 10000.0f);
    const float factor = f.get_f32(a + "rope.scaling.factor", f.get_f32(a + "rope.scale_linear", 0.0f));
    hp_.rope_freq_scale = factor > 0.0f ? 1.0f / factor : 1.0f;

    auto positive = [&](int32_t v, const char* key) {
        if (v <= 0 || v > (1 << 24)) fail(status::format, f.path(), ": ", a, key, " = ", v, " is out of range");
    };
    positive(hp_.n_ctx_train, "context_length");
    positive(hp_.n_embd, "embedding_length");
    positive(hp_.n_layer, "block_count");
    positive(hp_.n_ff, "feed_forward_length");
    positive(hp_.n_head, "attention.head_count");
    positive(hp_.n_head_kv, "attention.head_count_kv");
    if (hp_.n_layer > 4096) fail(status::format, f.path(), ": block_count ", hp_.n_layer, " is out of range");
    if (hp_.n_embd % hp_.n_head != 0)
        fail(status::format, f.path(), ": n_head ", hp_.n_head, " does not divide n_embd ", hp_.n_embd);
    if (hp_.n_head % hp_.n_head_kv != 0)
        fail(status::format, f.path(), ": n_head_kv ", hp_.n_head_kv, " does not divide n_head ", hp_.n_head);
    hp_.head_dim = hp_.n_embd / hp_.n_head;
    if (hp_.head_dim % 2 != 0) fail(status::format, f.path(), ": head dimension ", hp_.head_dim, " is odd");
    hp_.n_rot = static_cast<int32_t>(f.get_u32(a + "rope.dimension_count", static_cast<uint32_t>(hp_.head_dim)));
    if (hp_.n_rot != hp_.head_dim)
        fail(status::format, f.path(), ": rope.dimension_count ", hp_.n_rot, " must equal the head dimension ",
             hp_.head_dim);
    if (!(hp_.norm_eps >= 0.0f) || !std::isfinite(hp_.norm_eps))
        fail(status::format, f.path(), ": ", eps_key, " is not a finite non-negative number");
    if (!(hp_.rope_freq_base > 0.0f) || !std::isfinite(hp_.rope_freq_base))
        fail(status::format, f.path(), ": rope.freq_base must be positive");

    const gguf::tensor_info* embd = f.find_tensor("token_embd.weight");
    if (!embd) fail(status::format, f.path(), ": missing tensor 'token_embd.weight'");
    if (embd->ne[1] <= 0 || embd->ne[1] > (1 << 24))
        fail(status::format, f.path(), ": token_embd.weight has an invalid number of rows");
    hp_.n_vocab = static_cast<int32_t>(embd->ne[1]);
    sparse_file_ = f.sparse();

    // What the file declares must agree with the tensors it holds before anything is built from
    // it: the tokenizer's tables grow with the vocabulary, the layers with block_count.
    if (const gguf::value* tokens = f.find("tokenizer.ggml.tokens");
        tokens && tokens->type == gguf::value_type::array) {
        const size_t n_tokens = std::get<gguf::array_value>(tokens->data).size();
        if (n_tokens != static_cast<size_t>(hp_.n_vocab))
            fail(status::format, f.path(), ": vocabulary has ", n_tokens,
                 " tokens but token_embd has ", hp_.n_vocab, " rows");
    }
    const std::string last_layer = concat("blk.", hp_.n_layer - 1, ".attn_norm.weight");
    if (!f.find_tensor(last_layer))
        fail(status::format, f.path(), ": ", a, "block_count = ", hp_.n_layer, " but tensor '",
             last_layer, "' is missing");
}

pib_tensor model::bind(const std::string& name, int64_t ne0, int64_t ne1) {
    const gguf::tensor_info* t = file_->find_tensor(name);
    if (!t) fail(status::format, file_->path(), ": missing tensor '", name, "'");
    if (t->n_dims > 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        fail(status::format, file_->path(), ": tensor '", name, "' has shape [", t->ne[0], ", ", t->ne[1], ", ",
             t->ne[2], ", ", t->ne[3], "], expected [", ne0, ", ", ne1, "]");
    const type_traits traits = traits_of(t->type);
    if (static_cast<uint32_t>(t->type) >= 64 || (weight_types_ & PIB_TYPE_BIT(static_cast<uint32_t>(t->type))) == 0) {
        std::string supported;
        for (uint32_t id = 0; id < 64; ++id)
            if ((weight_types_ & PIB_TYPE_BIT(id)) != 0) supported += concat(supported.empty() ? "" : ", ", traits_of(id).name);
        fail(status::unsupported, file_->path(), ": tensor '", name, "' has type ", traits.name ? traits.name : "?",
             ", which this build cannot compute (supported: ", supported, ")");
    }
    if (ne0 % traits.block_size != 0)
        fail(status::format, file_->path(), ": tensor '", name, "' has rows of ", ne0, " elements, not a multiple of ",
             traits.name, "'s block of ", traits.block_size);
    n_params_ += static_cast<uint64_t>(t->n_elements());
    const size_t offset = static_cast<size_t>(t->data - file_->bytes().data());
    return pib_tensor{static_cast<uint32_t>(t->type), ne0, ne1, row_bytes(t->type, ne0), weights_.get(), offset};
}

pib_tensor model::bind_optional(const std::string& name, int64_t ne0, int64_t ne1) {
    return file_->find_tensor(name) ? bind(name, ne0, ne1) : pib_tensor{};
}

pib_tensor model::bind_norm(const std::string& name, int64_t n) {
    const pib_tensor t = bind(name, n, 1);
    if (t.type != static_cast<uint32_t>(ggml_type::f32))
        fail(status::unsupported, file_->path(), ": '", name, "' must be F32, as converters write norms and biases");
    return t;
}

pib_tensor model::bind_norm_optional(const std::string& name, int64_t n) {
    return file_->find_tensor(name) ? bind_norm(name, n) : pib_tensor{};
}

// Falcon's fused attn_qkv is bound as three row ranges, so every later step sees Wq, Wk, Wv.
void model::bind_attention(layer_weights& l, const std::string& p) {
    const arch_desc& arch = *hp_.arch;
    const int64_t d = hp_.n_embd, kv = hp_.n_embd_kv();
    if (arch.fused_qkv) {
        const pib_tensor qkv = bind(p + "attn_qkv.weight", d, d + 2 * kv);
        auto rows = [&](int64_t first, int64_t count) {
            pib_tensor t = qkv;
            t.offset += static_cast<size_t>(first) * qkv.nb1;
            t.ne1 = count;
            return t;
        };
        l.wq = rows(0, d);
        l.wk = rows(d, kv);
        l.wv = rows(d + kv, kv);
        l.attn_norm_2 = bind_norm_optional(p + "attn_norm_2.weight", d);
        if (present(l.attn_norm_2)) l.attn_norm_2_b = bind_norm_optional(p + "attn_norm_2.bias", d);
    } else {
        l.wq = bind(p + "attn_q.weight", d, d);
        l.wk = bind(p + "attn_k.weight", d, kv);
        l.wv = bind(p + "attn_v.weight", d, kv);
    }
    l.wo = bind(p + "attn_output.weight", d, d);
    l.attn_norm = bind_norm(p + "attn_norm.weight", d);
    if (arch.norm == norm_kind::layer) l.attn_norm_b = bind_norm_optional(p + "attn_norm.bias", d);
    if (arch.biases) {
        l.bq = bind_norm(p + "attn_q.bias", d);
        l.bk = bind_norm(p + "attn_k.bias", kv);
        l.bv = bind_norm(p + "attn_v.bias", kv);
        l.bo = bind_norm(p + "attn_output.bias", d);
    }
}

void model::bind_ffn(layer_weights& l, const std::string& p) {
    const arch_desc& arch = *hp_.arch;
    const int64_t d = hp_.n_embd, ff = hp_.n_ff;
    if (arch.ffn_norm) {
        l.ffn_norm = bind_norm(p + "ffn_norm.weight", d);
        if (arch.norm == norm_kind::layer) l.ffn_norm_b = bind_norm_optional(p + "ffn_norm.bias", d);
    }
    if (arch.gated_ffn) l.gate = bind(p + "ffn_gate.weight", d, ff);
    l.up = bind(p + "ffn_up.weight", d, ff);
    if (arch.biases) l.up_b = bind_norm(p + "ffn_up.bias", ff);
    ffn_type_ = static_cast<ggml_type>(l.up.type);
    if (sparse_file_) {
        l.down_t = bind(p + "ffn_down_t.weight", d, ff);
        if (arch.biases) l.down_b = bind_norm(p + "ffn_down_t.bias", d);
        const gguf::tensor_info* fc1 = file_->find_tensor(p + "fc1.weight");
        if (!fc1) fail(status::format, file_->path(), ": missing predictor tensor '", p, "fc1.weight'");
        if (fc1->ne[1] <= 0 || fc1->ne[1] > ff)
            fail(status::format, file_->path(), ": predictor '", p, "fc1.weight' has rank ", fc1->ne[1],
                 " (must be 1 .. n_ff)");
        l.predictor_rank = static_cast<int32_t>(fc1->ne[1]);
        l.fc1 = bind(p + "fc1.weight", d, l.predictor_rank);
        if (!file_->find_tensor(p + "fc2.weight"))
            fail(status::format, file_->path(), ": missing predictor tensor '", p, "fc2.weight'");
        l.fc2 = bind(p + "fc2.weight", l.predictor_rank, ff);
    } else {
        l.down = bind(p + "ffn_down.weight", ff, d);
        if (arch.biases) l.down_b = bind_norm(p + "ffn_down.bias", d);
    }
}

void model::bind_tensors(const load_options& options) {
    std::span<const uint8_t> bytes = file_->bytes();
    host_ = std::make_unique<device>(device::cpu(1));
    pib_device_info info{};
    host_->run("describing the CPU backend", &pib_vtable::device_info, &info);
    weight_types_ = info.weight_types;
    // Mapped or read into memory (use_mmap = 0), the file's bytes are the weights' buffer.
    weights_ = host_->wrap_host(const_cast<uint8_t*>(bytes.data()), bytes.size());

    const hparams& h = hp_;
    const arch_desc& arch = *h.arch;
    const int64_t d = h.n_embd;
    token_embd_ = bind("token_embd.weight", d, h.n_vocab);
    output_norm_ = bind_norm("output_norm.weight", d);
    if (arch.norm == norm_kind::layer) output_norm_b_ = bind_norm_optional("output_norm.bias", d);
    // OPT checkpoints tie the output to the embedding; a file may still carry its own.
    output_ = arch.learned_positions ? bind_optional("output.weight", d, h.n_vocab)
                                     : bind("output.weight", d, h.n_vocab);
    if (!present(output_)) output_ = token_embd_;
    if (arch.learned_positions) {
        const gguf::tensor_info* pe = file_->find_tensor("position_embd.weight");
        if (!pe) fail(status::format, file_->path(), ": missing tensor 'position_embd.weight'");
        if (pe->ne[1] < 3 || pe->ne[1] > (int64_t(1) << 24))
            fail(status::format, file_->path(), ": position_embd.weight has ", pe->ne[1],
                 " rows; OPT's table needs its 2 offset rows and at least one position");
        position_embd_ = bind("position_embd.weight", d, pe->ne[1]);
        hp_.n_positions = static_cast<int32_t>(pe->ne[1] - 2);
    }

    ffn_type_ = ggml_type::f32;
    layers_.resize(static_cast<size_t>(h.n_layer));
    for (int32_t il = 0; il < h.n_layer; ++il) {
        const std::string p = concat("blk.", il, ".");
        layer_weights& l = layers_[static_cast<size_t>(il)];
        bind_attention(l, p);
        bind_ffn(l, p);
        if (options.progress &&
            !options.progress(0.9f + 0.1f * static_cast<float>(il + 1) / h.n_layer, options.progress_user_data))
            fail(status::cancelled, "model loading cancelled by the progress callback");
    }

    sparse_inference_ = sparse_file_ && !options.force_dense;
    threshold_ = sparse_file_ ? file_->get_f32("powerinfer.sparse_threshold", 0.0f) : 0.0f;
    env_threshold(threshold_);
    if (options.override_threshold) threshold_ = options.sparse_threshold;

    switch (options.activation) {
    case ffn_activation_choice::relu:
        glu_ = arch.sparse_glu;
        break;
    case ffn_activation_choice::silu:
        if (!arch.gated_ffn)
            fail(status::invalid_argument, "the SiLU FFN needs a gate, which ", arch.name, " models do not have");
        if (sparse_file_)
            fail(status::invalid_argument, "the SiLU FFN cannot be used with a sparse file: its predictor "
                                           "assumes ReLU activations");
        glu_ = PIB_GLU_SILU;
        break;
    case ffn_activation_choice::from_file:
        if (sparse_file_) {
            glu_ = arch.sparse_glu;
        } else {
            const std::string act = file_->get_string("powerinfer.ffn_activation", "");
            if (act == "relu" || (!arch.gated_ffn && act.empty())) glu_ = arch.sparse_glu;
            else if (act == "silu" && !arch.gated_ffn)
                fail(status::format, file_->path(), ": powerinfer.ffn_activation = 'silu' needs a gate, which ",
                     arch.name, " models do not have");
            else if (act.empty() || act == "silu") glu_ = arch.dense_default_glu;
            else fail(status::format, file_->path(), ": powerinfer.ffn_activation = '", act,
                      "' is not one of relu, silu");
        }
        break;
    }
}

} // namespace pi
