#include "errors.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

// Owned by the module object, which lives as long as the interpreter.
PyObject* g_error_classes = nullptr;

PyObject* error_class(pi_status status) {
    if (g_error_classes) {
        py::handle classes(g_error_classes);
        py::int_ key(static_cast<int>(status));
        if (PyDict_Contains(classes.ptr(), key.ptr()) == 1) return classes[key].ptr();
    }
    return PyExc_RuntimeError;
}

} // namespace

std::string last_error_message(pi_status status) {
    const char* text = pi_last_error();
    return text && *text ? std::string(text) : std::string(pi_status_str(status));
}

void check(pi_status status) {
    if (status < 0) throw status_error(status, last_error_message(status));
}

void bind_errors(py::module_& m) {
    py::dict classes;
    m.attr("_error_classes") = classes;
    g_error_classes = classes.ptr();
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const status_error& e) {
            PyObject* cls = error_class(e.status());
            py::object instance = cls == PyExc_RuntimeError
                                      ? py::reinterpret_borrow<py::object>(cls)(e.what())
                                      : py::reinterpret_borrow<py::object>(cls)(
                                            e.what(), static_cast<int>(e.status()));
            PyErr_SetObject(cls, instance.ptr());
        }
    });
}

} // namespace pi::python
