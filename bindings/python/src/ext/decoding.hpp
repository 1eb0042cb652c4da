#pragma once
// Running a decoding call of the library on a worker thread while the Python thread waits,
// interruptibly (see waiting.hpp).
#include <functional>
#include <string>

#include "state.hpp"

namespace pi::python {

// A status and, for an error, its message, read on the thread that made the failing call.
struct outcome {
    pi_status status;
    std::string error;
};

outcome outcome_of(pi_status status);

// Runs `work` on a worker thread while this thread waits with the GIL released, Ctrl-C and
// ctx.cancel() reaching the library through pi_context_cancel(). Raises what the work returned
// (CancelledError naming `what` for PI_STATUS_CANCELLED).
void run_decoding(context_state& s, const std::function<outcome()>& work, const char* what);

} // namespace pi::python
