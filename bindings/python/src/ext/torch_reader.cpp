// powerinfer._powerinfer.read_torch_checkpoint: the converter reads pytorch_model*.bin and
// predictor model_<L>.pt files through lib/formats, the reader the planner uses too. Only the
// description of each tensor crosses into Python; the converter maps the bytes itself.
#include <cstdint>
#include <string>
#include <string_view>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "formats/mapped_file.hpp"
#include "formats/torch_checkpoint.hpp"
#include "support/error.hpp"
#include "text.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

// Names inside a file are arbitrary bytes; a message must still reach Python as one line.
[[noreturn]] void raise_value_error(std::string_view message) {
    PyErr_SetObject(PyExc_ValueError, decode_utf8(message).ptr());
    throw py::error_already_set();
}

py::tuple int_tuple(const std::vector<int64_t>& v) {
    py::tuple t(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        t[i] = py::int_(v[i]);
    return t;
}

// `path` is file-system bytes (os.fsencode). Each tensor is (name, dtype, shape, strides,
// offset, span, contiguous); errors are ValueError("<tensor or record>: <reason>"), the path
// left for the caller to put in front.
py::list read_torch_checkpoint(const std::string& path, uint64_t max_pickle_bytes) {
    require_no_nul(path, "the checkpoint path");
    std::vector<formats::torch_checkpoint_tensor> tensors;
    std::string failure;
    {
        py::gil_scoped_release nogil;
        try {
            const formats::mapped_file file(path);
            tensors = formats::read_torch_checkpoint(file.bytes(), path, max_pickle_bytes);
        } catch (const error& e) {
            failure = e.what();
        }
    }
    if (!failure.empty()) {
        std::string_view reason = failure;
        if (reason.starts_with(path + ": ")) reason.remove_prefix(path.size() + 2);
        raise_value_error(reason);
    }
    py::list out;
    for (const formats::torch_checkpoint_tensor& t : tensors) {
        PyObject* name =
            PyUnicode_DecodeUTF8(t.name.data(), static_cast<Py_ssize_t>(t.name.size()), "strict");
        if (!name) {
            PyErr_Clear();
            raise_value_error("data.pkl: cannot read the pickle: a tensor name is not UTF-8");
        }
        const formats::torch_tensor_data& d = t.data;
        out.append(py::make_tuple(py::reinterpret_steal<py::object>(name),
                                  std::string(d.dtype->name), int_tuple(d.shape),
                                  int_tuple(d.stride), d.offset, d.span, d.contiguous));
    }
    return out;
}

} // namespace

void bind_torch_reader(py::module_& m) {
    // The one cap: the converter's MAX_PICKLE_BYTES is read from here.
    m.attr("TORCH_MAX_PICKLE_BYTES") = formats::default_max_pickle_bytes;
    m.def("read_torch_checkpoint", &read_torch_checkpoint, py::arg("path"),
          py::arg("max_pickle_bytes") = formats::default_max_pickle_bytes);
}

} // namespace pi::python
