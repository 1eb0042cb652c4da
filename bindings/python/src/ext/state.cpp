#include "state.hpp"

#include <algorithm>

#include "errors.hpp"
#include "generation.hpp"

namespace pi::python {

context_state::context_state(model_ptr m, pi_context* c, int32_t batch, uint32_t default_seed)
    : model(std::move(m)), ctx(c), n_batch(std::min(batch, pi_context_n_ctx(c))),
      n_vocab(pi_n_vocab(model.get())), seed(default_seed),
      logits(std::make_shared<std::vector<float>>(static_cast<size_t>(n_vocab))) {}

context_state::~context_state() {
    pi_context_free(ctx);
}

void context_state::cancel() {
    cancel_requested.store(true);
    pi_context_cancel(ctx);
    std::shared_ptr<generation_state> running;
    {
        std::lock_guard lock(active_mutex);
        running = active.lock();
    }
    if (running) running->request_stop();
}

busy_guard::busy_guard(context_state& s) : owned_(&s) {
    bool expected = false;
    if (!s.busy.compare_exchange_strong(expected, true))
        throw status_error(PI_ERR_INVALID_ARGUMENT,
                           "the context is in use by another call or by an unfinished stream "
                           "(iterate it to the end or close() it first)");
    s.cancel_requested.store(false);
}

busy_guard::~busy_guard() {
    if (owned_) owned_->busy.store(false);
}

} // namespace pi::python
