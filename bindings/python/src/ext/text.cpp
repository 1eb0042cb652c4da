#include "text.hpp"

#include "errors.hpp"

namespace py = pybind11;

namespace pi::python {

py::str decode_utf8(std::string_view bytes) {
    PyObject* s =
        PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
    if (!s) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(s);
}

void require_no_nul(const std::string& s, const char* what) {
    if (s.find('\0') != std::string::npos)
        throw status_error(PI_ERR_INVALID_ARGUMENT,
                           std::string(what) + " contains a NUL character");
}

} // namespace pi::python
