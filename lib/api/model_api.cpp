#include <algorithm>
#include <cmath>
#include <cstring>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "gguf/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::progress_bridge;
using pi::api::require;

namespace {

template <size_t N> void copy_text(char (&dst)[N], const std::string& src) {
    const size_t n = std::min(N - 1, src.size());
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

pi_model_params model_defaults() {
    pi_model_params p{};
    p.struct_size = sizeof(p);
    p.use_mmap = 1;
    p.ffn_activation = PI_FFN_ACTIVATION_AUTO;
    p.vram_budget = -1.0;
    return p;
}

} // namespace

extern "C" {

pi_status pi_model_params_init(pi_model_params* params, size_t struct_size) {
    return api::init_params(params, struct_size, model_defaults(), "pi_model_params");
}

pi_status pi_model_load(const char* path, const pi_model_params* params, pi_model** out_model) {
    return guard([&] {
        require(out_model, "out_model");
        *out_model = nullptr;
        require(path, "path");
        const pi_model_params p =
            api::read_params(params, pi_model_default_params(), "pi_model_params");
        load_options o;
        o.use_mmap = p.use_mmap != 0;
        switch (p.ffn_activation) {
        case PI_FFN_ACTIVATION_AUTO:
            o.activation = ffn_activation_choice::from_file;
            break;
        case PI_FFN_ACTIVATION_RELU:
            o.activation = ffn_activation_choice::relu;
            break;
        case PI_FFN_ACTIVATION_SILU:
            o.activation = ffn_activation_choice::silu;
            break;
        default:
            fail(status::invalid_argument, "pi_model_params.ffn_activation ", p.ffn_activation,
                 " is unknown");
        }
        o.force_dense = p.dense != 0;
        o.override_threshold = p.override_sparse_threshold != 0;
        if (o.override_threshold && !std::isfinite(p.sparse_threshold))
            fail(status::invalid_argument, "pi_model_params.sparse_threshold must be finite");
        o.sparse_threshold = p.sparse_threshold;
        progress_bridge bridge{p.progress, p.progress_user_data};
        if (p.progress) {
            o.progress = &progress_bridge::call;
            o.progress_user_data = &bridge;
        }
        auto handle = std::make_unique<pi_model>();
        handle->impl = model::load(path, o);
        api::attach_offload(*handle, p, path);
        if (p.progress && !p.progress(1.0f, p.progress_user_data))
            fail(status::cancelled, "model loading cancelled by the progress callback");
        *out_model = handle.release();
        return PI_OK;
    });
}

void pi_model_free(pi_model* model) {
    delete model;
}

pi_status pi_model_info_get(const pi_model* model, pi_model_info* info) {
    return guard([&] {
        require(model, "model");
        require(info, "info");
        const pi::model& m = *model->impl;
        const hparams& h = m.hp();
        pi_model_info out{};
        out.struct_size = sizeof(out);
        copy_text(out.architecture, std::string(h.arch->name));
        copy_text(out.name, m.name());
        out.n_params = m.n_params();
        out.file_size = m.file().bytes().size();
        out.n_layer = h.n_layer;
        out.n_embd = h.n_embd;
        out.n_head = h.n_head;
        out.n_head_kv = h.n_head_kv;
        out.n_ff = h.n_ff;
        out.n_vocab = h.n_vocab;
        out.n_ctx_train = h.n_ctx_train;
        out.sparse = m.sparse_file() ? 1 : 0;
        out.sparse_inference = m.sparse_inference() ? 1 : 0;
        out.ffn_activation =
            m.glu() == PIB_GLU_SILU ? PI_FFN_ACTIVATION_SILU : PI_FFN_ACTIVATION_RELU;
        out.sparse_threshold = m.sparse_threshold();
        for (size_t il = 0; il < m.layers().size() && il < PI_MAX_LAYERS; ++il)
            out.predictor_rank[il] = m.layers()[il].predictor_rank;
        const char* type_name = traits_of(m.ffn_type()).name;
        copy_text(out.weight_type, type_name ? type_name : "?");
        if (const offload* off = model->offloaded.get()) {
            copy_text(out.offload_device, model->offload_device);
            out.offload_bytes = off->bytes_allocated();
            for (size_t il = 0; il < off->n_layers() && il < PI_MAX_LAYERS; ++il) {
                out.hot_neurons[il] = static_cast<int32_t>(off->layer(il).hot.size());
                out.attn_on_device[il] = off->layer(il).has_attn() ? 1 : 0;
                out.predictor_on_device[il] = off->layer(il).has_predictor() ? 1 : 0;
            }
            out.output_on_device = off->has_output() ? 1 : 0;
            out.kv_n_ctx_on_device = off->kv_n_ctx();
        }
        api::write_output(info, out, "pi_model_info");
        return PI_OK;
    });
}

pi_status pi_tokenize(const pi_model* model, const char* text, size_t text_len, int32_t add_bos,
                      pi_token* tokens, size_t capacity, size_t* n_tokens) {
    return guard([&] {
        require(model, "model");
        require(n_tokens, "n_tokens");
        *n_tokens = 0;
        if (!text && text_len > 0) fail(status::invalid_argument, "argument 'text' is NULL");
        if (!tokens && capacity > 0) fail(status::invalid_argument, "argument 'tokens' is NULL");
        const std::vector<int32_t> ids =
            model->impl->vocab().encode(std::string_view(text ? text : "", text_len), add_bos != 0);
        *n_tokens = ids.size();
        if (ids.size() > capacity)
            fail(status::invalid_argument, "token buffer holds ", capacity, " tokens, ", ids.size(),
                 " needed");
        std::copy(ids.begin(), ids.end(), tokens);
        return PI_OK;
    });
}

pi_status pi_token_to_piece(const pi_model* model, pi_token token, char* buf, size_t capacity,
                            size_t* len) {
    return guard([&] {
        require(model, "model");
        require(len, "len");
        *len = 0;
        if (!buf && capacity > 0) fail(status::invalid_argument, "argument 'buf' is NULL");
        const std::string piece = model->impl->vocab().piece(token);
        *len = piece.size();
        if (piece.size() > capacity)
            fail(status::invalid_argument, "piece buffer holds ", capacity, " bytes, ",
                 piece.size(), " needed");
        std::memcpy(buf, piece.data(), piece.size());
        return PI_OK;
    });
}

pi_status pi_detokenize(const pi_model* model, const pi_token* tokens, size_t n_tokens, char* buf,
                        size_t capacity, size_t* len) {
    return guard([&] {
        require(model, "model");
        require(len, "len");
        *len = 0;
        if (!tokens && n_tokens > 0) fail(status::invalid_argument, "argument 'tokens' is NULL");
        if (!buf && capacity > 0) fail(status::invalid_argument, "argument 'buf' is NULL");
        const std::string text = model->impl->vocab().decode(tokens, n_tokens);
        api::write_c_string(text, buf, capacity, len, "text");
        return PI_OK;
    });
}

pi_token pi_token_bos(const pi_model* model) {
    return model ? model->impl->vocab().vocabulary().bos : -1;
}
int32_t pi_vocab_adds_bos(const pi_model* model) {
    return model && model->impl->vocab().uses_bos() ? 1 : 0;
}
pi_token pi_token_eos(const pi_model* model) {
    return model ? model->impl->vocab().vocabulary().eos : -1;
}
pi_token pi_token_newline(const pi_model* model) {
    return model ? model->impl->vocab().vocabulary().newline : -1;
}
int32_t pi_n_vocab(const pi_model* model) {
    return model ? model->impl->hp().n_vocab : -1;
}

} // extern "C"
