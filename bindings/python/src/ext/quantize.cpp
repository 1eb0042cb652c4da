// powerinfer._powerinfer.model_quantize: pi_model_quantize for the converter's --outtype
// q8_0/q4_0 step. The work runs with the GIL released; the optional progress callable takes it
// back for each report, so Ctrl-C (a pending signal) cancels the quantization.
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "errors.hpp"
#include "text.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

struct quantize_progress {
    py::object fn;
    std::optional<py::error_already_set> error;

    static int call(float progress, void* self) {
        auto& q = *static_cast<quantize_progress*>(self);
        py::gil_scoped_acquire gil;
        try {
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (!q.fn.is_none()) q.fn(progress);
            return 1;
        } catch (py::error_already_set& e) {
            q.error.emplace(std::move(e));
        }
        return 0;
    }
};

// Paths are file-system bytes (os.fsencode).
void model_quantize(const std::string& in_path, const std::string& out_path,
                    const std::string& type, int n_threads, bool keep_predictor,
                    py::object progress) {
    require_no_nul(in_path, "the input path");
    require_no_nul(out_path, "the output path");
    require_no_nul(type, "the quantization type");
    pi_quantize_params p = pi_quantize_default_params();
    p.type = type.c_str();
    p.n_threads = n_threads;
    p.keep_predictor = keep_predictor ? 1 : 0;
    quantize_progress report{std::move(progress), std::nullopt};
    p.progress = &quantize_progress::call;
    p.progress_user_data = &report;
    pi_status status = PI_OK;
    std::string error;
    {
        py::gil_scoped_release nogil;
        status = pi_model_quantize(in_path.c_str(), out_path.c_str(), &p);
        if (status != PI_OK) error = last_error_message(status);
    }
    if (report.error) throw std::move(*report.error);
    if (status != PI_OK) throw status_error(status, error);
}

} // namespace

void bind_quantize(py::module_& m) {
    m.def("model_quantize", &model_quantize, py::arg("in_path"), py::arg("out_path"),
          py::arg("type"), py::arg("n_threads") = 0, py::arg("keep_predictor") = false,
          py::arg("progress") = py::none());
}

} // namespace pi::python
