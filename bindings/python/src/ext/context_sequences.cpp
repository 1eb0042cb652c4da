// Context methods for several sequences: multi-sequence batches and per-sequence cache edits.
#include <algorithm>
#include <string>

#include <pybind11/stl.h>

#include "context.hpp"
#include "decoding.hpp"
#include "errors.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

void require_same_length(size_t n, const std::optional<std::vector<int32_t>>& v, const char* what) {
    if (v && v->size() != n)
        throw status_error(PI_ERR_INVALID_ARGUMENT,
                           std::string(what) + " has " + std::to_string(v->size()) +
                               " entries for " + std::to_string(n) + " tokens");
}

// Without flags: each sequence's last token of the batch, as the library would choose.
std::vector<int8_t> logit_flags(size_t n, const std::optional<std::vector<int32_t>>& seq_ids,
                                const std::optional<std::vector<bool>>& given) {
    std::vector<int8_t> flags(n, 0);
    if (given) {
        if (given->size() != n)
            throw status_error(PI_ERR_INVALID_ARGUMENT,
                               "logits has " + std::to_string(given->size()) + " entries for " +
                                   std::to_string(n) + " tokens");
        std::transform(given->begin(), given->end(), flags.begin(),
                       [](bool b) { return static_cast<int8_t>(b ? 1 : 0); });
        return flags;
    }
    if (!seq_ids) {
        flags[n - 1] = 1;
        return flags;
    }
    for (size_t i = 0; i < n; ++i) {
        const bool last_of_its_sequence =
            std::find(seq_ids->begin() + static_cast<std::ptrdiff_t>(i) + 1, seq_ids->end(),
                      (*seq_ids)[i]) == seq_ids->end();
        flags[i] = last_of_its_sequence ? 1 : 0;
    }
    return flags;
}

} // namespace

void context::require_sequence(const context_state& s, int32_t seq, bool all_allowed) const {
    const int32_t n = pi_context_n_seq_max(s.ctx);
    if ((all_allowed && seq == -1) || (seq >= 0 && seq < n)) return;
    throw status_error(PI_ERR_INVALID_ARGUMENT, "sequence id " + std::to_string(seq) +
                                                    " is outside [0, " + std::to_string(n) + ")" +
                                                    (all_allowed ? " (or -1 for all)" : ""));
}

py::array_t<float> context::decode(const std::vector<int32_t>& tokens,
                                   const std::optional<std::vector<int32_t>>& positions,
                                   const std::optional<std::vector<int32_t>>& seq_ids,
                                   const std::optional<std::vector<bool>>& logits) {
    const std::shared_ptr<context_state> s = state();
    if (tokens.empty())
        throw status_error(PI_ERR_INVALID_ARGUMENT, "decode() needs at least one token");
    require_same_length(tokens.size(), positions, "positions");
    require_same_length(tokens.size(), seq_ids, "seq_ids");
    const std::vector<int8_t> flags = logit_flags(tokens.size(), seq_ids, logits);
    const auto rows = static_cast<py::ssize_t>(std::count(flags.begin(), flags.end(), 1));
    busy_guard busy(*s);
    s->has_logits = false;
    py::array_t<float> out({rows, static_cast<py::ssize_t>(s->n_vocab)});
    float* const into = out.mutable_data();
    run_decoding(
        *s,
        [&] {
            const auto step = static_cast<size_t>(std::max(s->n_batch, 1));
            const auto n_vocab = static_cast<size_t>(s->n_vocab);
            size_t row = 0;
            for (size_t at = 0; at < tokens.size(); at += step) {
                if (s->cancel_requested.load()) return outcome_of(PI_STATUS_CANCELLED);
                const size_t n = std::min(step, tokens.size() - at);
                pi_seq_batch batch{};
                batch.struct_size = sizeof(batch);
                batch.n_tokens = static_cast<int32_t>(n);
                batch.tokens = tokens.data() + at;
                batch.pos = positions ? positions->data() + at : nullptr;
                batch.seq_id = seq_ids ? seq_ids->data() + at : nullptr;
                batch.logits = flags.data() + at;
                const pi_status status = pi_context_decode(s->ctx, &batch);
                if (status != PI_OK) return outcome_of(status);
                for (size_t i = 0; i < n; ++i) {
                    if (!flags[at + i]) continue;
                    const float* l = pi_get_logits(s->ctx, static_cast<int32_t>(i));
                    if (!l)
                        return outcome{PI_ERR_INTERNAL, "the library kept no logits for token " +
                                                            std::to_string(at + i)};
                    std::copy_n(l, n_vocab, into + row++ * n_vocab);
                }
            }
            return outcome_of(PI_OK);
        },
        "decode()");
    if (rows > 0) {
        const float* last = into + static_cast<size_t>(rows - 1) * s->logits->size();
        std::copy_n(last, s->logits->size(), s->logits->begin());
        s->has_logits = true;
    }
    return out;
}

int32_t context::n_seq_max() const {
    return pi_context_n_seq_max(state()->ctx);
}

void context::kv_seq_remove(int32_t seq, int32_t p0, int32_t p1) {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, seq, true);
    check(pi_kv_seq_remove(s->ctx, seq, p0, p1));
    s->has_logits = false;
}

void context::kv_seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, src, false);
    require_sequence(*s, dst, false);
    check(pi_kv_seq_copy(s->ctx, src, dst, p0, p1));
}

void context::kv_seq_keep(int32_t seq) {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, seq, false);
    check(pi_kv_seq_keep(s->ctx, seq));
}

void context::kv_seq_shift(int32_t seq, int32_t p0, int32_t p1, int32_t delta) {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, seq, false);
    check(pi_kv_seq_shift(s->ctx, seq, p0, p1, delta));
    s->has_logits = false;
}

int32_t context::kv_seq_pos_min(int32_t seq) const {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, seq, false);
    return pi_kv_seq_pos_min(s->ctx, seq);
}

int32_t context::kv_seq_pos_max(int32_t seq) const {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, seq, false);
    return pi_kv_seq_pos_max(s->ctx, seq);
}

int32_t context::kv_n_used_cells() const {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    return pi_kv_n_used_cells(s->ctx);
}

void bind_context_sequences(py::class_<context>& c) {
    c.def("decode", &context::decode, py::arg("tokens"), py::arg("positions").none(true),
          py::arg("seq_ids").none(true), py::arg("logits").none(true))
        .def_property_readonly("n_seq_max", &context::n_seq_max)
        .def("kv_seq_remove", &context::kv_seq_remove, py::arg("seq"), py::arg("p0"), py::arg("p1"))
        .def("kv_seq_copy", &context::kv_seq_copy, py::arg("src"), py::arg("dst"), py::arg("p0"),
             py::arg("p1"))
        .def("kv_seq_keep", &context::kv_seq_keep, py::arg("seq"))
        .def("kv_seq_shift", &context::kv_seq_shift, py::arg("seq"), py::arg("p0"), py::arg("p1"),
             py::arg("delta"))
        .def("kv_seq_pos_min", &context::kv_seq_pos_min, py::arg("seq"))
        .def("kv_seq_pos_max", &context::kv_seq_pos_max, py::arg("seq"))
        .def_property_readonly("kv_n_used_cells", &context::kv_n_used_cells);
}

} // namespace pi::python
