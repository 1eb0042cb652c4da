#pragma once
// pi_status failures as C++ exceptions, translated into the powerinfer.Error hierarchy that the
// Python package registers at import time.
#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>

#include "powerinfer.h"

namespace pi::python {

class status_error : public std::runtime_error {
  public:
    status_error(pi_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    pi_status status() const noexcept { return status_; }

  private:
    pi_status status_;
};

// The message of the call that just failed on this thread: pi_last_error() is per thread, so
// this must run on the thread that made the call.
std::string last_error_message(pi_status status);

// Throws status_error for a negative status.
void check(pi_status status);

// Installs the exception translator and the `_error_classes` registry on the module.
void bind_errors(pybind11::module_& m);

} // namespace pi::python
