#include "context.hpp"

#include <algorithm>

#include <pybind11/stl.h>

#include "decoding.hpp"
#include "errors.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

pi_status decode_all(context_state& s, const std::vector<int32_t>& tokens) {
    const auto step = static_cast<size_t>(std::max(s.n_batch, 1));
    for (size_t at = 0; at < tokens.size(); at += step) {
        if (s.cancel_requested.load()) return PI_STATUS_CANCELLED;
        const pi_batch batch{static_cast<int32_t>(std::min(step, tokens.size() - at)),
                             tokens.data() + at, nullptr, nullptr};
        const pi_status status = pi_decode(s.ctx, &batch);
        if (status != PI_OK) return status;
    }
    const float* logits = pi_get_logits(s.ctx, -1);
    if (!logits) return PI_ERR_INTERNAL; // cannot happen: the last token's logits are requested
    std::copy_n(logits, s.logits->size(), s.logits->begin());
    return PI_OK;
}

// Removes a context's FFN observer when it goes out of scope.
class observer_removal {
  public:
    explicit observer_removal(pi_context* ctx) : ctx_(ctx) {}
    observer_removal(const observer_removal&) = delete;
    observer_removal& operator=(const observer_removal&) = delete;
    ~observer_removal() { pi_context_set_ffn_observer(ctx_, nullptr, nullptr); }

  private:
    pi_context* ctx_;
};

// Where the FFN observer writes one trace: the rows of the chunk being decoded.
struct trace_sink {
    float* inputs;      // [n_layer][n_tokens][n_embd]
    bool* active;       // [n_layer][n_tokens][n_ff]
    float* activations; // same shape, or NULL
    size_t n_tokens;
    size_t chunk_start = 0;

    static int write(int32_t layer, int32_t n, const float* input, int32_t n_embd,
                     const float* activation, int32_t n_ff, void* self) {
        auto* t = static_cast<trace_sink*>(self);
        const size_t d = static_cast<size_t>(n_embd), ff = static_cast<size_t>(n_ff);
        const size_t row = static_cast<size_t>(layer) * t->n_tokens + t->chunk_start;
        const size_t values = static_cast<size_t>(n) * ff;
        std::copy_n(input, static_cast<size_t>(n) * d, t->inputs + row * d);
        bool* mask = t->active + row * ff;
        for (size_t i = 0; i < values; ++i)
            mask[i] = activation[i] != 0.0f;
        if (t->activations) std::copy_n(activation, values, t->activations + row * ff);
        return 1;
    }
};

} // namespace

context::context(const model& m, int32_t n_ctx, int32_t n_batch, std::optional<int32_t> n_threads,
                 uint32_t seed, bool kv_f16, int32_t n_seq_max) {
    model_ptr h = m.handle();
    pi_context_params p = pi_context_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    if (n_threads) p.n_threads = *n_threads;
    p.seed = seed;
    p.kv_f16 = kv_f16 ? 1 : 0;
    p.n_seq_max = n_seq_max;
    pi_context* created = nullptr;
    pi_status status = PI_OK;
    std::string error;
    {
        py::gil_scoped_release nogil;
        status = pi_context_create(h.get(), &p, &created);
        if (status != PI_OK) error = last_error_message(status);
    }
    if (status != PI_OK) throw status_error(status, error);
    state_ = std::make_shared<context_state>(std::move(h), created, n_batch, seed);
}

std::shared_ptr<context_state> context::state() const {
    if (!state_) throw py::value_error("the context is closed");
    return state_;
}

void context::close() {
    if (state_ && state_->busy.load()) state_->cancel();
    state_.reset();
}

void context::cancel() {
    if (state_) state_->cancel();
}

void context::eval(const std::vector<int32_t>& tokens) {
    const std::shared_ptr<context_state> s = state();
    if (tokens.empty())
        throw status_error(PI_ERR_INVALID_ARGUMENT, "eval() needs at least one token");
    busy_guard busy(*s);
    s->has_logits = false;
    const int32_t n_past = pi_context_n_past(s->ctx), n_ctx = pi_context_n_ctx(s->ctx);
    if (tokens.size() > static_cast<size_t>(n_ctx - n_past))
        throw status_error(PI_ERR_CONTEXT_FULL,
                           std::to_string(tokens.size()) + " tokens after the " +
                               std::to_string(n_past) +
                               " cached ones do not fit in n_ctx = " + std::to_string(n_ctx));
    run_decoding(
        *s, [&] { return outcome_of(decode_all(*s, tokens)); }, "eval()");
    s->has_logits = true;
}

py::array_t<float> context::logits() const {
    const std::shared_ptr<context_state> s = state();
    if (!s->has_logits)
        throw status_error(PI_ERR_INVALID_ARGUMENT,
                           "no logits: call eval() first (generate() and stream() reset them)");
    auto* keep = new std::shared_ptr<std::vector<float>>(s->logits);
    py::capsule owner(keep,
                      [](void* p) { delete static_cast<std::shared_ptr<std::vector<float>>*>(p); });
    py::array_t<float> view(static_cast<py::ssize_t>(s->logits->size()), s->logits->data(), owner);
    view.attr("flags").attr("writeable") = false;
    return view;
}

std::unique_ptr<generation> context::start(std::string prompt, const generate_args& args,
                                           size_t capacity) {
    return std::make_unique<generation>(state(), std::move(prompt), args, capacity);
}

int32_t context::n_ctx() const {
    return pi_context_n_ctx(state()->ctx);
}

int32_t context::n_past() const {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    return pi_context_n_past(s->ctx);
}

void context::truncate(int32_t pos) {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    check(pi_kv_truncate(s->ctx, pos));
    s->has_logits = false;
}

py::tuple context::trace_ffn(const py::array_t<int32_t, py::array::c_style>& ids,
                             bool with_activations) {
    const std::shared_ptr<context_state> s = state();
    if (ids.ndim() != 1)
        throw status_error(PI_ERR_INVALID_ARGUMENT, "trace_ffn() needs a 1-D array of token ids");
    const std::vector<int32_t> tokens(ids.data(), ids.data() + ids.size());
    if (tokens.empty())
        throw status_error(PI_ERR_INVALID_ARGUMENT, "trace_ffn() needs at least one token");
    busy_guard busy(*s);
    const int32_t n_ctx = pi_context_n_ctx(s->ctx);
    if (tokens.size() > static_cast<size_t>(n_ctx))
        throw status_error(PI_ERR_CONTEXT_FULL,
                           std::to_string(tokens.size()) +
                               " tokens do not fit in n_ctx = " + std::to_string(n_ctx));
    pi_model_info info{};
    info.struct_size = sizeof(info);
    check(pi_model_info_get(s->model.get(), &info));
    const auto L = static_cast<py::ssize_t>(info.n_layer),
               T = static_cast<py::ssize_t>(tokens.size());
    py::array_t<float> inputs({L, T, static_cast<py::ssize_t>(info.n_embd)});
    py::array_t<bool> active({L, T, static_cast<py::ssize_t>(info.n_ff)});
    py::object activations = py::none();
    trace_sink sink{inputs.mutable_data(), active.mutable_data(), nullptr, tokens.size()};
    if (with_activations) {
        py::array_t<float> a({L, T, static_cast<py::ssize_t>(info.n_ff)});
        sink.activations = a.mutable_data();
        activations = std::move(a);
    }
    s->has_logits = false;
    check(pi_kv_truncate(s->ctx, 0));
    check(pi_context_set_ffn_observer(s->ctx, &trace_sink::write, &sink));
    // The observer points at `sink` on this frame: removed on every way out, after the worker
    // has been joined (run_decoding joins it before returning or throwing).
    const observer_removal removal{s->ctx};
    run_decoding(
        *s,
        [&] {
            const auto step = static_cast<size_t>(std::max(s->n_batch, 1));
            pi_status status = PI_OK;
            for (size_t at = 0; at < tokens.size() && status == PI_OK; at += step) {
                if (s->cancel_requested.load()) {
                    status = PI_STATUS_CANCELLED;
                    break;
                }
                sink.chunk_start = at;
                const pi_batch batch{static_cast<int32_t>(std::min(step, tokens.size() - at)),
                                     tokens.data() + at, nullptr, nullptr};
                status = pi_decode(s->ctx, &batch);
            }
            return outcome_of(status);
        },
        "trace_ffn()");
    return py::make_tuple(std::move(inputs), std::move(active), std::move(activations));
}

py::dict context::stats() const {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    pi_context_stats st{};
    st.struct_size = sizeof(st);
    check(pi_context_stats_get(s->ctx, &st));
    py::dict d;
    d["n_prompt_tokens"] = st.n_prompt_tokens;
    d["n_decode_tokens"] = st.n_decode_tokens;
    d["prompt_seconds"] = st.prompt_seconds;
    d["decode_seconds"] = st.decode_seconds;
    d["ffn_active_fraction"] = st.ffn_active_fraction;
    d["decode_bytes"] = st.decode_bytes;
    return d;
}

void context::reset_stats() {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    pi_context_stats_reset(s->ctx);
}

void bind_context(py::module_& m) {
    py::class_<context> c(m, "_Context");
    c.def(py::init<const model&, int32_t, int32_t, std::optional<int32_t>, uint32_t, bool,
                   int32_t>(),
          py::arg("model"), py::arg("n_ctx"), py::arg("n_batch"), py::arg("n_threads"),
          py::arg("seed"), py::arg("kv_f16"), py::arg("n_seq_max"))
        .def("close", &context::close)
        .def_property_readonly("closed", &context::closed)
        .def("cancel", &context::cancel)
        .def("eval", &context::eval, py::arg("tokens"))
        .def("logits", &context::logits)
        .def(
            "start",
            [](context& self, std::string prompt, int32_t max_tokens, float temperature,
               int32_t top_k, float top_p, std::vector<std::string> stop,
               std::optional<uint32_t> seed, bool add_bos, size_t capacity,
               std::optional<py::dict> chain, const sampler* with, bool reuse_cache,
               bool context_shift, int32_t n_keep, int32_t seq_id, bool parse_special,
               bool token_events, int32_t n_probs) {
                generate_args args;
                args.max_tokens = max_tokens;
                args.temperature = temperature;
                args.top_k = top_k;
                args.top_p = top_p;
                args.stop = std::move(stop);
                args.seed = seed;
                args.add_bos = add_bos;
                if (chain) {
                    if (!chain->contains("seed"))
                        (*chain)["seed"] = seed.value_or(self.state()->seed);
                    args.chain = sampler_config::from_dict(*chain);
                }
                if (with) args.sampler = with->handle();
                args.reuse_cache = reuse_cache;
                args.context_shift = context_shift;
                args.n_keep = n_keep;
                args.seq_id = seq_id;
                args.parse_special = parse_special;
                args.token_events = token_events;
                args.n_probs = n_probs;
                return self.start(std::move(prompt), args, capacity);
            },
            py::arg("prompt"), py::arg("max_tokens"), py::arg("temperature"), py::arg("top_k"),
            py::arg("top_p"), py::arg("stop"), py::arg("seed"), py::arg("add_bos"),
            py::arg("capacity"), py::arg("chain") = py::none(),
            py::arg("sampler").none(true) = nullptr, py::arg("reuse_cache") = true,
            py::arg("context_shift") = false, py::arg("n_keep") = 1, py::arg("seq_id") = 0,
            py::arg("parse_special") = false, py::arg("token_events") = false,
            py::arg("n_probs") = 0)
        .def_property_readonly("n_ctx", &context::n_ctx)
        .def_property_readonly("n_past", &context::n_past)
        .def("truncate", &context::truncate, py::arg("pos"))
        .def("trace_ffn", &context::trace_ffn, py::arg("tokens"), py::arg("with_activations"))
        .def("stats", &context::stats)
        .def("reset_stats", &context::reset_stats);
    bind_context_sequences(c);
    bind_context_saved_state(c);
}

} // namespace pi::python
