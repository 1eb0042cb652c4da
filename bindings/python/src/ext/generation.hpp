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

#include "sampler.hpp"
#include "sampler_config.hpp"
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
    // The whole chain (replacing the four basic fields), or null.
    std::shared_ptr<const sampler_config> chain;
    // The caller's chain, used and advanced (replacing both), or null.
    std::shared_ptr<sampler_handle> sampler;
    bool reuse_cache = true;
    bool context_shift = false;
    int32_t n_keep = 1;
    int32_t seq_id = 0;
    bool parse_special = false;
    // Queue a token event (id, log-probability, n_probs alternatives) after each token's text.
    bool token_events = false;
    int32_t n_probs = 0;
};

// What the worker queues: a piece of text, or the event of one token.
struct queued_item {
    std::string text;
    bool is_event = false;
    pi_token token = -1;
    float logprob = 0.0f;
    std::vector<pi_token> top_tokens;
    std::vector<float> top_logprobs;
};

struct generation_state {
    std::shared_ptr<context_state> context;
    std::string prompt;
    std::vector<std::string> stop;
    std::shared_ptr<const sampler_config> chain;
    std::shared_ptr<sampler_handle> sampler; // marked busy until the worker ends
    pi_generate_params params{};
    // Pieces queued ahead of the reader; the worker waits when the queue is full.
    size_t capacity = 0;

    std::mutex m;
    std::condition_variable cv;
    std::deque<queued_item> pieces;
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

    // The next piece of text, or None at the end (token events are skipped). Raises the run's
    // error at the end.
    pybind11::object next_piece();
    // The next piece of text (str), token event ((token, logprob, text, [(token, logprob)])),
    // or None at the end.
    pybind11::object next_item();
    // Every remaining piece, joined.
    pybind11::str collect();
    void cancel();
    // Cancels and waits for the worker; the pieces not yet read are dropped.
    void close();
    // {n_prompt_tokens, ..., stop_reason} once finished, else None.
    pybind11::object result();

  private:
    std::optional<queued_item> next_queued();
    void finish();

    std::shared_ptr<generation_state> state_;
    std::thread worker_;
    bool joined_ = false;
};

void bind_generation(pybind11::module_& m);

} // namespace pi::python
