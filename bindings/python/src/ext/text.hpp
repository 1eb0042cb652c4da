#pragma once
// Text crossing the boundary: the C API takes NUL-terminated strings and returns UTF-8 bytes.
#include <string>
#include <string_view>

#include <pybind11/pybind11.h>

namespace pi::python {

// A str from UTF-8 bytes; invalid bytes (a model may emit any) become U+FFFD.
pybind11::str decode_utf8(std::string_view bytes);

// Raises InvalidArgumentError when s would be cut short at a NUL by the C API.
void require_no_nul(const std::string& s, const char* what);

} // namespace pi::python
