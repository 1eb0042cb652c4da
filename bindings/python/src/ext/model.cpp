#include "model.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "errors.hpp"
#include "text.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

// Runs on the loading thread with the GIL released: takes the GIL to call the Python callback
// and to run signal handlers, so that Ctrl-C cancels loading too.
struct progress_call {
    py::object fn;
    std::optional<py::error_already_set> error;

    static int call(float progress, void* self) {
        auto& c = *static_cast<progress_call*>(self);
        py::gil_scoped_acquire gil;
        try {
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (c.fn.is_none()) return 1;
            const py::object go_on = c.fn(progress);
            if (go_on.is_none()) return 1;
            const int truth = PyObject_IsTrue(go_on.ptr());
            if (truth < 0) throw py::error_already_set();
            return truth;
        } catch (py::error_already_set& e) {
            c.error.emplace(std::move(e));
        }
        return 0;
    }
};

std::vector<bool> flags(const int32_t* values, int32_t n) {
    std::vector<bool> out(static_cast<size_t>(n));
    std::transform(values, values + n, out.begin(), [](int32_t v) { return v != 0; });
    return out;
}

} // namespace

model::model(const std::string& path, const load_args& args, py::object progress) {
    require_no_nul(path, "the model path");
    if (args.offload_device) require_no_nul(*args.offload_device, "offload_device");
    if (args.activation_stats)
        require_no_nul(*args.activation_stats, "the activation statistics path");
    pi_model_params p = pi_model_default_params();
    p.use_mmap = args.use_mmap ? 1 : 0;
    p.dense = args.dense ? 1 : 0;
    p.ffn_activation = args.ffn_activation;
    if (args.sparse_threshold) {
        p.override_sparse_threshold = 1;
        p.sparse_threshold = *args.sparse_threshold;
    }
    if (args.vram_budget) p.vram_budget = *args.vram_budget;
    if (args.offload_device) p.offload_device = args.offload_device->c_str();
    if (args.activation_stats) p.activation_stats = args.activation_stats->c_str();
    p.kv_n_ctx = args.kv_n_ctx;
    p.reset_gpu_index = args.reset_gpu_index ? 1 : 0;
    p.disable_gpu_index = args.disable_gpu_index ? 1 : 0;
    progress_call call{std::move(progress), std::nullopt};
    p.progress = &progress_call::call;
    p.progress_user_data = &call;

    pi_model* loaded = nullptr;
    pi_status status = PI_OK;
    std::string error;
    {
        py::gil_scoped_release nogil;
        status = pi_model_load(path.c_str(), &p, &loaded);
        if (status != PI_OK) error = last_error_message(status);
    }
    if (call.error) throw std::move(*call.error);
    if (status != PI_OK) throw status_error(status, error);
    handle_ = model_ptr(loaded, pi_model_free);
}

model_ptr model::handle() const {
    if (!handle_) throw py::value_error("the model is closed");
    return handle_;
}

py::dict model::info() const {
    const model_ptr h = handle();
    pi_model_info i{};
    i.struct_size = sizeof(i);
    check(pi_model_info_get(h.get(), &i));
    py::dict d;
    d["architecture"] = std::string(i.architecture);
    d["name"] = decode_utf8(i.name);
    d["n_params"] = i.n_params;
    d["file_size"] = i.file_size;
    d["n_layer"] = i.n_layer;
    d["n_embd"] = i.n_embd;
    d["n_head"] = i.n_head;
    d["n_head_kv"] = i.n_head_kv;
    d["n_ff"] = i.n_ff;
    d["n_vocab"] = i.n_vocab;
    d["n_ctx_train"] = i.n_ctx_train;
    d["sparse"] = i.sparse != 0;
    d["sparse_inference"] = i.sparse_inference != 0;
    d["ffn_activation"] = i.ffn_activation == PI_FFN_ACTIVATION_RELU ? "relu" : "silu";
    d["sparse_threshold"] = i.sparse_threshold;
    const int32_t layers = std::clamp(i.n_layer, 0, PI_MAX_LAYERS);
    d["predictor_rank"] = std::vector<int32_t>(i.predictor_rank, i.predictor_rank + layers);
    d["weight_type"] = std::string(i.weight_type);
    d["offload_device"] = std::string(i.offload_device);
    d["offload_bytes"] = i.offload_bytes;
    d["hot_neurons"] = std::vector<int32_t>(i.hot_neurons, i.hot_neurons + layers);
    d["attn_on_device"] = flags(i.attn_on_device, layers);
    d["predictor_on_device"] = flags(i.predictor_on_device, layers);
    d["output_on_device"] = i.output_on_device != 0;
    d["kv_n_ctx_on_device"] = i.kv_n_ctx_on_device;
    d["bos"] = pi_token_bos(h.get());
    d["eos"] = pi_token_eos(h.get());
    d["newline"] = pi_token_newline(h.get());
    d["eot"] = pi_token_eot(h.get());
    return d;
}

std::vector<int32_t> model::tokenize(const std::string& text, bool add_bos, bool special) const {
    const model_ptr h = handle();
    // SPM gives at most one token per byte, plus BOS and the leading-space marker.
    std::vector<int32_t> ids(text.size() + 4);
    py::gil_scoped_release nogil;
    for (;;) {
        size_t n = 0;
        const uint32_t flags = (add_bos ? PI_TOKENIZE_ADD_BOS : 0u) | PI_TOKENIZE_PARSE_SPECIAL;
        const pi_status status = special ? pi_tokenize_with_flags(h.get(), text.data(), text.size(),
                                                                  flags, ids.data(), ids.size(), &n)
                                         : pi_tokenize(h.get(), text.data(), text.size(),
                                                       add_bos ? 1 : 0, ids.data(), ids.size(), &n);
        if (status == PI_ERR_INVALID_ARGUMENT && n > ids.size()) {
            ids.resize(n);
            continue;
        }
        check(status);
        ids.resize(n);
        return ids;
    }
}

py::str model::detokenize(const std::vector<int32_t>& ids) const {
    const model_ptr h = handle();
    std::string text(ids.size() * 8 + 16, '\0');
    {
        py::gil_scoped_release nogil;
        for (;;) {
            size_t len = 0;
            const pi_status status =
                pi_detokenize(h.get(), ids.data(), ids.size(), text.data(), text.size(), &len);
            if (status == PI_ERR_INVALID_ARGUMENT && len + 1 > text.size()) {
                text.resize(len + 1);
                continue;
            }
            check(status);
            text.resize(len);
            break;
        }
    }
    return decode_utf8(text);
}

py::bytes model::token_to_piece(int32_t id) const {
    const model_ptr h = handle();
    std::string piece(32, '\0');
    for (;;) {
        size_t len = 0;
        const pi_status status = pi_token_to_piece(h.get(), id, piece.data(), piece.size(), &len);
        if (status == PI_ERR_INVALID_ARGUMENT && len > piece.size()) {
            piece.resize(len);
            continue;
        }
        check(status);
        piece.resize(len);
        return py::bytes(piece);
    }
}

bool model::token_is_eog(int32_t id) const {
    const model_ptr h = handle();
    if (id < 0 || id >= pi_n_vocab(h.get()))
        throw status_error(PI_ERR_INVALID_ARGUMENT, "token id " + std::to_string(id) +
                                                        " is outside the vocabulary [0, " +
                                                        std::to_string(pi_n_vocab(h.get())) + ")");
    return pi_token_is_eog(h.get(), id) != 0;
}

void bind_model(py::module_& m) {
    py::class_<model> c(m, "_Model");
    c.def(py::init([](py::bytes path, bool use_mmap, bool dense, int32_t ffn_activation,
                      std::optional<float> sparse_threshold, std::optional<double> vram_budget,
                      std::optional<std::string> offload_device, int32_t kv_n_ctx,
                      bool reset_gpu_index, bool disable_gpu_index,
                      std::optional<std::string> activation_stats, py::object progress) {
              return std::make_unique<model>(
                  std::string(path),
                  load_args{.use_mmap = use_mmap,
                            .dense = dense,
                            .ffn_activation = ffn_activation,
                            .sparse_threshold = sparse_threshold,
                            .vram_budget = vram_budget,
                            .offload_device = std::move(offload_device),
                            .kv_n_ctx = kv_n_ctx,
                            .reset_gpu_index = reset_gpu_index,
                            .disable_gpu_index = disable_gpu_index,
                            .activation_stats = std::move(activation_stats)},
                  std::move(progress));
          }),
          py::arg("path"), py::arg("use_mmap"), py::arg("dense"), py::arg("ffn_activation"),
          py::arg("sparse_threshold"), py::arg("vram_budget"), py::arg("offload_device"),
          py::arg("kv_n_ctx"), py::arg("reset_gpu_index"), py::arg("disable_gpu_index"),
          py::arg("activation_stats"), py::arg("progress"))
        .def("close", &model::close)
        .def_property_readonly("closed", &model::closed)
        .def("info", &model::info)
        .def("tokenize", &model::tokenize, py::arg("text"), py::arg("add_bos"),
             py::arg("special") = false)
        .def("detokenize", &model::detokenize, py::arg("ids"))
        .def("token_to_piece", &model::token_to_piece, py::arg("id"))
        .def_property_readonly("n_vocab",
                               [](const model& self) { return pi_n_vocab(self.handle().get()); })
        .def("token_is_eog", &model::token_is_eog, py::arg("id"));
    bind_model_chat(c);
}

} // namespace pi::python
