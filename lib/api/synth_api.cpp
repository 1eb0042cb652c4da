#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "synthetic/synthetic.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

pi_synth_params synth_defaults() {
    const synth_options d;
    pi_synth_params p{};
    p.struct_size = sizeof(p);
    p.arch = "llama";
    p.n_embd = d.n_embd;
    p.n_layer = d.n_layer;
    p.n_head = d.n_head;
    p.n_head_kv = d.n_head_kv;
    p.n_ff = d.n_ff;
    p.n_ctx_train = d.n_ctx_train;
    p.predictor_rank = d.predictor_rank;
    p.f16 = 0;
    p.sparse = 1;
    p.dense_relu = 1;
    p.sparsity = d.sparsity;
    p.power_law = d.power_law;
    p.predictor_noise = d.predictor_noise;
    p.seed = d.seed;
    return p;
}

} // namespace

extern "C" {

pi_status pi_synth_params_init(pi_synth_params* params, size_t struct_size) {
    return api::init_params(params, struct_size, synth_defaults(), "pi_synth_params");
}

pi_status pi_synth_model_write(const pi_synth_params* params, const char* out_path) {
    return guard([&] {
        require(params, "params");
        require(out_path, "out_path");
        const pi_synth_params p =
            api::read_params(params, pi_synth_default_params(), "pi_synth_params");
        require(p.vocab_path, "pi_synth_params.vocab_path");
        synth_options o;
        o.arch = p.arch ? p.arch : "llama";
        o.n_embd = p.n_embd;
        o.n_layer = p.n_layer;
        o.n_head = p.n_head;
        o.n_head_kv = p.n_head_kv;
        o.n_ff = p.n_ff;
        o.n_ctx_train = p.n_ctx_train;
        o.predictor_rank = p.predictor_rank;
        o.weight_type = p.f16 ? ggml_type::f16 : ggml_type::f32;
        o.sparse = p.sparse != 0;
        o.dense_relu = p.dense_relu != 0;
        o.sparsity = p.sparsity;
        o.power_law = p.power_law;
        o.predictor_noise = p.predictor_noise;
        o.seed = p.seed;
        o.vocab_path = p.vocab_path;
        write_synthetic_model(o, out_path);
        return PI_OK;
    });
}

} // extern "C"
