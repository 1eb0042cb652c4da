#include "waiting.hpp"

#include <chrono>

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace pi::python {

namespace {

constexpr std::chrono::milliseconds poll_interval{20};

bool wait_step(std::mutex& m, std::condition_variable& cv, const std::function<bool()>& ready) {
    std::unique_lock lock(m);
    return cv.wait_for(lock, poll_interval, ready);
}

} // namespace

void cancel_and_wait(std::mutex& m, std::condition_variable& cv,
                     const std::function<bool()>& finished, const std::function<void()>& cancel) {
    py::gil_scoped_release nogil;
    do {
        cancel();
    } while (!wait_step(m, cv, finished));
}

void wait_interruptibly(std::mutex& m, std::condition_variable& cv,
                        const std::function<bool()>& ready, const std::function<bool()>& finished,
                        const std::function<void()>& cancel,
                        const std::atomic<bool>& cancel_requested) {
    for (;;) {
        bool done = false;
        {
            py::gil_scoped_release nogil;
            done = wait_step(m, cv, ready);
        }
        if (done) return;
        if (cancel_requested.load()) cancel();
        if (PyErr_CheckSignals() != 0) {
            py::error_already_set interrupt;
            cancel_and_wait(m, cv, finished, cancel);
            throw std::move(interrupt);
        }
    }
}

} // namespace pi::python
