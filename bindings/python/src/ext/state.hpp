#pragma once
// What the Python objects own. Handles are shared so that freeing is deterministic (close()) yet
// never pulls memory from under a running call: a context holds its model, and a worker thread
// holds the context it runs on.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "powerinfer.h"

namespace pi::python {

using model_ptr = std::shared_ptr<pi_model>;

struct generation_state;

struct context_state {
    context_state(model_ptr m, pi_context* c, int32_t batch, uint32_t default_seed);
    ~context_state();
    context_state(const context_state&) = delete;
    context_state& operator=(const context_state&) = delete;

    // Stops whatever runs on the context: pi_decode/pi_generate and a stream's worker.
    void cancel();

    model_ptr model; // declared first: released after the context
    pi_context* ctx;
    int32_t n_batch; // as the library clamps it: at most n_ctx
    int32_t n_vocab;
    uint32_t seed;
    // The last eval()'s logits, copied out of the library so that a NumPy view of it can never
    // dangle (it outlives both the next pi_decode and close()).
    std::shared_ptr<std::vector<float>> logits;
    bool has_logits = false;

    std::atomic<bool> busy{false};
    std::atomic<bool> cancel_requested{false};
    std::mutex active_mutex;
    std::weak_ptr<generation_state> active;
};

// Marks the context in use for a call; a second concurrent call is refused, not undefined.
class busy_guard {
  public:
    explicit busy_guard(context_state& s);
    ~busy_guard();
    busy_guard(const busy_guard&) = delete;
    busy_guard& operator=(const busy_guard&) = delete;
    // Hands the mark to a worker that clears it itself.
    void release_to_worker() noexcept { owned_ = nullptr; }

  private:
    context_state* owned_;
};

} // namespace pi::python
