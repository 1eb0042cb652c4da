#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "model/quantize_model.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::progress_bridge;
using pi::api::require;

namespace {

pi_quantize_params quantize_defaults() {
    pi_quantize_params p{};
    p.struct_size = sizeof(p);
    p.type = "Q4_0";
    p.n_threads = 0;
    p.keep_predictor = 0;
    p.pure = 0;
    p.leave_output_tensor = 0;
    return p;
}

} // namespace

extern "C" {

pi_status pi_quantize_params_init(pi_quantize_params* params, size_t struct_size) {
    return api::init_params(params, struct_size, quantize_defaults(), "pi_quantize_params");
}

pi_status pi_model_quantize(const char* in_path, const char* out_path,
                            const pi_quantize_params* params) {
    return guard([&] {
        require(in_path, "in_path");
        require(out_path, "out_path");
        const pi_quantize_params p =
            api::read_params(params, pi_quantize_default_params(), "pi_quantize_params");
        require(p.type, "pi_quantize_params.type");
        quantize_options o;
        o.target = parse_quantize_type(p.type);
        o.n_threads = p.n_threads;
        o.keep_predictor = p.keep_predictor != 0;
        o.pure = p.pure != 0;
        o.leave_output = p.leave_output_tensor != 0;
        progress_bridge bridge{p.progress, p.progress_user_data};
        if (p.progress) {
            o.progress = &progress_bridge::call;
            o.progress_user_data = &bridge;
        }
        quantize_model(in_path, out_path, o);
        return PI_OK;
    });
}

} // extern "C"
