#include "decoding.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <pybind11/pybind11.h>

#include "errors.hpp"
#include "waiting.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

struct decoding_call {
    std::mutex m;
    std::condition_variable cv;
    bool finished = false;
    pi_status status = PI_OK;
    std::string error;
};

} // namespace

outcome outcome_of(pi_status status) {
    return {status, status < 0 ? last_error_message(status) : std::string()};
}

void run_decoding(context_state& s, const std::function<outcome()>& work, const char* what) {
    auto call = std::make_shared<decoding_call>();
    std::thread worker([call, &work] {
        auto [status, error] = work();
        {
            std::lock_guard lock(call->m);
            call->status = status;
            call->error = std::move(error);
            call->finished = true;
        }
        call->cv.notify_all();
    });
    const auto finished = [&] { return call->finished; };
    try {
        wait_interruptibly(
            call->m, call->cv, finished, finished, [&] { pi_context_cancel(s.ctx); },
            s.cancel_requested);
    } catch (...) {
        py::gil_scoped_release nogil;
        worker.join();
        throw;
    }
    {
        py::gil_scoped_release nogil;
        worker.join();
    }
    if (call->status == PI_STATUS_CANCELLED)
        throw status_error(PI_STATUS_CANCELLED,
                           std::string(what) + " was cancelled; n_past tells what is cached");
    if (call->status < 0) throw status_error(call->status, call->error);
}

} // namespace pi::python
