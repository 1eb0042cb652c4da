// powerinfer._powerinfer: the C API of libpowerinfer for the `powerinfer` package, which adds
// the documented Python classes on top. Only powerinfer.h is used, except by torch_reader.cpp,
// which links lib/formats (not part of the C API) for the converter.
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "context.hpp"
#include "errors.hpp"
#include "generation.hpp"
#include "model.hpp"
#include "sampler.hpp"
#include "text.hpp"

namespace pi::python {
// quantize.cpp
void bind_quantize(pybind11::module_& m);
// torch_reader.cpp
void bind_torch_reader(pybind11::module_& m);
} // namespace pi::python

namespace py = pybind11;
using namespace pi::python;

namespace {

template <typename T> void set_if(const py::dict& given, const char* key, T& field) {
    if (given.contains(key)) field = given[key].cast<T>();
}

// Writes a synthetic model; `fields` holds pi_synth_params fields to override (by name).
void synth_model_write(const std::string& out_path, const std::string& vocab_path,
                       const py::dict& fields) {
    pi_synth_params p = pi_synth_default_params();
    std::string arch = p.arch ? p.arch : "llama";
    set_if(fields, "arch", arch);
    p.arch = arch.c_str();
    p.vocab_path = vocab_path.c_str();
    set_if(fields, "n_embd", p.n_embd);
    set_if(fields, "n_layer", p.n_layer);
    set_if(fields, "n_head", p.n_head);
    p.n_head_kv = p.n_head;
    set_if(fields, "n_head_kv", p.n_head_kv);
    set_if(fields, "n_ff", p.n_ff);
    set_if(fields, "n_ctx_train", p.n_ctx_train);
    set_if(fields, "predictor_rank", p.predictor_rank);
    set_if(fields, "f16", p.f16);
    set_if(fields, "sparse", p.sparse);
    set_if(fields, "dense_relu", p.dense_relu);
    set_if(fields, "sparsity", p.sparsity);
    set_if(fields, "power_law", p.power_law);
    set_if(fields, "predictor_noise", p.predictor_noise);
    set_if(fields, "seed", p.seed);
    require_no_nul(out_path, "the output path");
    require_no_nul(vocab_path, "the vocabulary path");
    require_no_nul(arch, "the architecture");
    pi_status status = PI_OK;
    std::string error;
    {
        py::gil_scoped_release nogil;
        status = pi_synth_model_write(&p, out_path.c_str());
        if (status != PI_OK) error = last_error_message(status);
    }
    if (status != PI_OK) throw status_error(status, error);
}

py::dict synth_defaults() {
    const pi_synth_params p = pi_synth_default_params();
    py::dict d;
    d["arch"] = p.arch ? p.arch : "llama";
    d["n_embd"] = p.n_embd;
    d["n_layer"] = p.n_layer;
    d["n_head"] = p.n_head;
    d["n_ff"] = p.n_ff;
    d["n_ctx_train"] = p.n_ctx_train;
    d["predictor_rank"] = p.predictor_rank;
    d["f16"] = p.f16;
    d["sparse"] = p.sparse;
    d["dense_relu"] = p.dense_relu;
    d["sparsity"] = p.sparsity;
    d["power_law"] = p.power_law;
    d["predictor_noise"] = p.predictor_noise;
    d["seed"] = p.seed;
    return d;
}

} // namespace

PYBIND11_MODULE(_powerinfer, m) {
    m.doc() = "libpowerinfer's C API; use the `powerinfer` package instead.";
    bind_errors(m);
    bind_model(m);
    bind_sampler(m);
    bind_generation(m);
    bind_context(m);
    bind_quantize(m);
    bind_torch_reader(m);
    m.def("version", [] { return std::string(pi_version()); });
    m.def("system_info", [] { return std::string(pi_system_info()); });
    m.def("status_str",
          [](int status) { return std::string(pi_status_str(static_cast<pi_status>(status))); });
    m.def("synth_model_write", &synth_model_write, py::arg("out_path"), py::arg("vocab_path"),
          py::arg("fields"));
    m.def("synth_defaults", &synth_defaults);
    m.attr("SEED_RANDOM") = PI_SEED_RANDOM;
    m.attr("STATUS_CANCELLED") = static_cast<int>(PI_STATUS_CANCELLED);
    m.attr("MAX_SEQUENCES") = PI_MAX_SEQUENCES;
}
