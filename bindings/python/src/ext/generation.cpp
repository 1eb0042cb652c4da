#include "generation.hpp"

#include <algorithm>
#include <limits>

#include "errors.hpp"
#include "text.hpp"
#include "waiting.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

int queue(generation_state& g, queued_item item) {
    std::unique_lock lock(g.m);
    g.cv.wait(lock, [&] { return g.stop_requested || g.pieces.size() < g.capacity; });
    if (g.stop_requested) return 0;
    g.pieces.push_back(std::move(item));
    g.cv.notify_all();
    return 1;
}

int queue_piece(const char* text, size_t len, void* user_data) {
    queued_item item;
    item.text.assign(text, len);
    return queue(*static_cast<generation_state*>(user_data), std::move(item));
}

int queue_event(const pi_token_event* event, void* user_data) {
    queued_item item;
    item.is_event = true;
    item.token = event->token;
    item.logprob = event->logprob;
    if (event->text) item.text.assign(event->text, event->len);
    const auto n_top = static_cast<size_t>(std::max(event->n_top, 0));
    if (n_top > 0 && event->top_tokens && event->top_logprobs) {
        item.top_tokens.assign(event->top_tokens, event->top_tokens + n_top);
        item.top_logprobs.assign(event->top_logprobs, event->top_logprobs + n_top);
    }
    return queue(*static_cast<generation_state*>(user_data), std::move(item));
}

void run(const std::shared_ptr<generation_state>& g) {
    std::vector<const char*> stop;
    for (const std::string& s : g->stop)
        stop.push_back(s.c_str());
    g->params.stop = stop.empty() ? nullptr : stop.data();
    g->params.n_stop = stop.size();
    pi_generate_result r{};
    r.struct_size = sizeof(r);
    const pi_status status = pi_generate(g->context->ctx, g->prompt.c_str(), &g->params, &r);
    std::string error = status < 0 ? last_error_message(status) : std::string();
    if (g->sampler) g->sampler->busy.store(false);
    g->context->busy.store(false);
    {
        std::lock_guard lock(g->m);
        g->status = status;
        g->error = std::move(error);
        g->result = r;
        g->finished = true;
    }
    g->cv.notify_all();
}

const char* stop_reason_name(int32_t reason) {
    switch (reason) {
    case PI_STOP_EOS:
        return "eos";
    case PI_STOP_MAX_TOKENS:
        return "max_tokens";
    case PI_STOP_STRING:
        return "stop_string";
    // The binding's callback only refuses a piece when the run is cancelled.
    case PI_STOP_CALLBACK:
    case PI_STOP_CANCELLED:
        return "cancelled";
    case PI_STOP_CONTEXT_FULL:
        return "context_full";
    default:
        return "none";
    }
}

} // namespace

void generation_state::request_stop() {
    {
        std::lock_guard lock(m);
        stop_requested = true;
    }
    cv.notify_all();
}

generation::generation(std::shared_ptr<context_state> context, std::string prompt,
                       const generate_args& args, size_t capacity)
    : state_(std::make_shared<generation_state>()) {
    require_no_nul(prompt, "the prompt");
    for (const std::string& s : args.stop)
        require_no_nul(s, "a stop string");
    generation_state& g = *state_;
    g.context = std::move(context);
    g.prompt = std::move(prompt);
    g.stop = args.stop;
    g.capacity = capacity == 0 ? std::numeric_limits<size_t>::max() : capacity;
    g.params = pi_generate_default_params();
    g.params.max_tokens = args.max_tokens;
    g.params.temperature = args.temperature;
    g.params.top_k = args.top_k;
    g.params.top_p = args.top_p;
    g.params.seed = args.seed.value_or(g.context->seed);
    g.params.add_bos = args.add_bos ? 1 : 0;
    g.params.callback = &queue_piece;
    g.params.user_data = &g;
    g.chain = args.chain;
    g.params.sampler_params = g.chain ? &g.chain->params() : nullptr;
    g.params.reuse_cache = args.reuse_cache ? 1 : 0;
    g.params.context_shift = args.context_shift ? 1 : 0;
    g.params.n_keep = args.n_keep;
    g.params.seq_id = args.seq_id;
    g.params.parse_special = args.parse_special ? 1 : 0;
    g.params.on_token = args.token_events ? &queue_event : nullptr;
    g.params.n_probs = args.n_probs;

    busy_guard busy(*g.context);
    if (args.sampler) {
        bool expected = false;
        if (!args.sampler->busy.compare_exchange_strong(expected, true))
            throw status_error(PI_ERR_INVALID_ARGUMENT,
                               "the sampler is in use by another call or generation");
        g.sampler = args.sampler;
        g.params.sampler = g.sampler->sampler;
    }
    g.context->has_logits = false;
    {
        std::lock_guard lock(g.context->active_mutex);
        g.context->active = state_;
    }
    try {
        worker_ = std::thread([g = state_] { run(g); });
    } catch (...) {
        if (g.sampler) g.sampler->busy.store(false);
        throw;
    }
    busy.release_to_worker();
}

generation::~generation() {
    try {
        close();
    } catch (...) {
        // close() only throws for an interpreter error while re-acquiring the GIL; the worker
        // has been joined or detached by then.
    }
}

void generation::finish() {
    if (joined_) return;
    {
        py::gil_scoped_release nogil;
        worker_.join();
    }
    joined_ = true;
}

std::optional<queued_item> generation::next_queued() {
    generation_state& g = *state_;
    wait_interruptibly(
        g.m, g.cv, [&] { return !g.pieces.empty() || g.finished; }, [&] { return g.finished; },
        [&] { cancel(); }, g.context->cancel_requested);
    std::optional<queued_item> piece;
    {
        std::lock_guard lock(g.m);
        if (!g.pieces.empty()) {
            piece = std::move(g.pieces.front());
            g.pieces.pop_front();
        }
    }
    if (piece) {
        g.cv.notify_all();
        return piece;
    }
    finish();
    if (g.status < 0) throw status_error(g.status, g.error);
    return std::nullopt;
}

py::object generation::next_piece() {
    for (;;) {
        const std::optional<queued_item> item = next_queued();
        if (!item) return py::none();
        if (!item->is_event) return decode_utf8(item->text);
    }
}

py::object generation::next_item() {
    const std::optional<queued_item> item = next_queued();
    if (!item) return py::none();
    if (!item->is_event) return decode_utf8(item->text);
    py::list top;
    for (size_t i = 0; i < item->top_tokens.size(); ++i)
        top.append(py::make_tuple(item->top_tokens[i], item->top_logprobs[i]));
    return py::make_tuple(item->token, item->logprob, decode_utf8(item->text), top);
}

py::str generation::collect() {
    std::string text;
    for (auto item = next_queued(); item; item = next_queued())
        if (!item->is_event) text += item->text;
    return decode_utf8(text);
}

void generation::cancel() {
    state_->request_stop();
    pi_context_cancel(state_->context->ctx);
}

void generation::close() {
    if (joined_) return;
    generation_state& g = *state_;
    cancel_and_wait(
        g.m, g.cv, [&] { return g.finished; }, [&] { cancel(); });
    finish();
}

py::object generation::result() {
    generation_state& g = *state_;
    std::lock_guard lock(g.m);
    if (!g.finished) return py::none();
    py::dict d;
    d["n_prompt_tokens"] = g.result.n_prompt_tokens;
    d["n_generated_tokens"] = g.result.n_generated_tokens;
    d["prompt_seconds"] = g.result.prompt_seconds;
    d["decode_seconds"] = g.result.decode_seconds;
    d["stop_reason"] = stop_reason_name(g.result.stop_reason);
    d["n_cached_tokens"] = g.result.n_cached_tokens;
    d["n_context_shifts"] = g.result.n_context_shifts;
    return d;
}

void bind_generation(py::module_& m) {
    py::class_<generation>(m, "_Generation")
        .def("next_piece", &generation::next_piece)
        .def("next_item", &generation::next_item)
        .def("collect", &generation::collect)
        .def("cancel", &generation::cancel)
        .def("close", &generation::close)
        .def_property_readonly("result", &generation::result);
}

} // namespace pi::python
