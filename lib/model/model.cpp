#include "model/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "gguf/gguf.hpp"
#include "support/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace pi {

namespace {

bool is_supported_weight_type(ggml_type t) {
    switch (t) {
    case ggml_type::f32:
    case ggml_type::f16:
    case ggml_type::q4_0:
    case ggml_type::q4_1:
    case ggml_type::q5_0:
    case ggml_type::q5_1:
    case ggml_type::q8_0: return true;
    default: return false;
    }
}

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
    m->file_ = gguf::file::open(path);
    m->read_hparams();
    m->tokenizer_ = tokenizer::from_gguf(*m->file_);
    if (m->tokenizer_->n_tokens() != m->hp_.n_vocab)
        fail(status::format, path, ": vocabulary has ", m->tokenizer_->n_tokens(),
             " tokens but token_embd has ", m->hp_.n_vocab, " rows");
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
    hp_.rms_eps = f.get_f32(a + "attention.layer_norm_rms_epsilon");
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
    if (!(hp_.rms_eps >= 0.0f) || !std::isfinite(hp_.rms_eps))
        fail(status::format, f.path(), ": layer_norm_rms_epsilon is not a finite non-negative number");
    if (!(hp_.rope_freq_base > 0.0f) || !std::isfinite(hp_.rope_freq_base))
        fail(status::format, f.path(), ": rope.freq_base must be positive");

    const gguf::tensor_info* embd = f.find_tensor("token_embd.weight");
    if (!embd) fail(status::format, f.path(), ": missing tensor 'token_embd.weight'");
    if (embd->ne[1] <= 0 || embd->ne[1] > (1 << 24))
        fail(status::format, f.path(), ": token_embd.weight has an invalid number of rows");
    hp_.n_vocab = static_cast<int32_t>(embd->ne[1]);
    sparse_file_ = f.sparse();
}

pib_tensor model::bind(const std::string& name, int64_t ne0, int64_t ne1) {
    const gguf::tensor_info* t = file_->find_tensor(name);
    if (!t) fail(status::format, file_->path(), ": missing tensor '", name, "'");
    if (t->n_dims > 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        fail(status::format, file_->path(), ": tensor '", name, "' has shape [", t->ne[0], ", ", t->ne[1], ", ",
             t->ne[2], ", ", t->ne[3], "], expected [", ne0, ", ", ne1, "]");
    if (!is_supported_weight_type(t->type)) {
        const char* type_name = traits_of(t->type).name;
        fail(status::unsupported, file_->path(), ": tensor '", name, "' has type ", type_name ? type_name : "?",
             ", which this build cannot compute yet (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)");
    }
    n_params_ += static_cast<uint64_t>(t->n_elements());
    const size_t offset = static_cast<size_t>(t->data - file_->bytes().data());
    return pib_tensor{static_cast<uint32_t>(t->type), ne0, ne1, row_bytes(t->type, ne0), weights_.get(), offset};
}

void model::bind_tensors(const load_options& options) {
    std::span<const uint8_t> bytes = file_->bytes();
    host_ = std::make_unique<device>(device::cpu(1));
    if (options.use_mmap) {
        weights_ = host_->wrap_host(const_cast<uint8_t*>(bytes.data()), bytes.size());
    } else {
        weights_ = host_->alloc(bytes.size());
        constexpr size_t chunk = size_t(64) << 20;
        for (size_t off = 0; off < bytes.size(); off += chunk) {
            const size_t n = std::min(chunk, bytes.size() - off);
            host_->upload(weights_, off, bytes.data() + off, n);
            if (options.progress && !options.progress(0.9f * static_cast<float>(off + n) / bytes.size(),
                                                      options.progress_user_data))
                fail(status::cancelled, "model loading cancelled by the progress callback");
        }
    }

    const hparams& h = hp_;
    const int64_t d = h.n_embd, kv = h.n_embd_kv(), ff = h.n_ff;
    token_embd_ = bind("token_embd.weight", d, h.n_vocab);
    output_norm_ = bind("output_norm.weight", d, 1);
    output_ = bind("output.weight", d, h.n_vocab);
    if (output_norm_.type != static_cast<uint32_t>(ggml_type::f32))
        fail(status::unsupported, file_->path(), ": output_norm.weight must be F32");

    ffn_type_ = ggml_type::f32;
    layers_.resize(static_cast<size_t>(h.n_layer));
    for (int32_t il = 0; il < h.n_layer; ++il) {
        const std::string p = concat("blk.", il, ".");
        layer_weights& l = layers_[static_cast<size_t>(il)];
        l.attn_norm = bind(p + "attn_norm.weight", d, 1);
        l.wq = bind(p + "attn_q.weight", d, d);
        l.wk = bind(p + "attn_k.weight", d, kv);
        l.wv = bind(p + "attn_v.weight", d, kv);
        l.wo = bind(p + "attn_output.weight", d, d);
        l.ffn_norm = bind(p + "ffn_norm.weight", d, 1);
        if (l.attn_norm.type != static_cast<uint32_t>(ggml_type::f32) ||
            l.ffn_norm.type != static_cast<uint32_t>(ggml_type::f32))
            fail(status::unsupported, file_->path(), ": norm weights of layer ", il, " must be F32");
        l.gate = bind(p + "ffn_gate.weight", d, ff);
        l.up = bind(p + "ffn_up.weight", d, ff);
        ffn_type_ = static_cast<ggml_type>(l.up.type);
        if (sparse_file_) {
            l.down_t = bind(p + "ffn_down_t.weight", d, ff);
            const gguf::tensor_info* fc1 = file_->find_tensor(p + "fc1.weight");
            if (!fc1) fail(status::format, file_->path(), ": missing predictor tensor '", p, "fc1.weight'");
            if (fc1->ne[1] <= 0 || fc1->ne[1] > ff)
                fail(status::format, file_->path(), ": predictor '", p, "fc1.weight' has rank ", fc1->ne[1],
                     " (must be 1 .. n_ff)");
            l.predictor_rank = static_cast<int32_t>(fc1->ne[1]);
            l.fc1 = bind(p + "fc1.weight", d, l.predictor_rank);
            l.fc2 = bind(p + "fc2.weight", l.predictor_rank, ff);
        } else {
            l.down = bind(p + "ffn_down.weight", ff, d);
        }
        if (options.progress &&
            !options.progress(0.9f + 0.1f * static_cast<float>(il + 1) / h.n_layer, options.progress_user_data))
            fail(status::cancelled, "model loading cancelled by the progress callback");
    }

    sparse_inference_ = sparse_file_ && !options.force_dense;
    threshold_ = sparse_file_ ? file_->get_f32("powerinfer.sparse_threshold", 0.0f) : 0.0f;
    env_threshold(threshold_);
    if (options.override_threshold) threshold_ = options.sparse_threshold;

    const arch_desc& arch = *h.arch;
    switch (options.activation) {
    case ffn_activation_choice::relu:
        glu_ = arch.sparse_glu;
        break;
    case ffn_activation_choice::silu:
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
            if (act == "relu") glu_ = arch.sparse_glu;
            else if (act.empty() || act == "silu") glu_ = arch.dense_default_glu;
            else fail(status::format, file_->path(), ": powerinfer.ffn_activation = '", act,
                      "' is not one of relu, silu");
        }
        break;
    }
}

} // namespace pi
