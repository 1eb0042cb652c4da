#pragma once
// One pi_generate run on a worker thread. The worker never touches Python: its callback queues
// the text pieces, and the Python thread takes them with the GIL released in between, so that
// Ctrl-C reaches it and cancels the run.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pybind11/pybind11.h>

#include "state.hpp"

namespace pi::python {

struct generate_args {
    int32_t max_tokens = 128;
    float temperature = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    std::vector<std::string> stop;
    std::optional<uint32_t> seed;
    bool add_bos = true;
};

struct generation_state {
    std::shared_ptr<context_state> context;
    std::string prompt;
    std::vector<std::string> stop;
    pi_generate_params params{};
    // Pieces queued ahead of the reader; the worker waits when the queue is full.
    size_t capacity = 0;

    std::mutex m;
    std::condition_variable cv;
    std::deque<std::string> pieces;
    bool stop_requested = false;
    bool finished = false;
    pi_status status = PI_OK;
    std::string error;
    pi_generate_result result{};

    void request_stop();
};

class generation {
  public:
    // capacity 0: unbounded (generate() collects everything).
    generation(std::shared_ptr<context_state> context, std::string prompt,
               const generate_args& args, size_t capacity);
    ~generation();
    generation(const generation&) = delete;
    generation& operator=(const generation&) = delete;

    // The next piece of text, or None at the end. Raises the run's error at the end.
    pybind11::object next_piece();
    // Every remaining piece, joined.
    pybind11::str collect();
    void cancel();
    // Cancels and waits for the worker; the pieces not yet read are dropped.
    void close();
    // {n_prompt_tokens, ..., stop_reason} once finished, else None.
    pybind11::object result();

  private:
    std::optional<std::string> next_bytes();
    void finish();

    std::shared_ptr<generation_state> state_;
    std::thread worker_;
    bool joined_ = false;
};

void bind_generation(pybind11::module_& m);

} // namespace pi::python
