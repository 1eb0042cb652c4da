// Context methods that save and restore a conversation: the KV cache of one or all sequences,
// the tokens behind it, the last logits and, optionally, a sampler's state.
#include <optional>
#include <string>

#include "context.hpp"
#include "errors.hpp"
#include "text.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

// Runs a state call with the GIL released, the sampler (if any) claimed; raises its error.
template <typename Call> void run_state_call(const sampler* with, Call&& call) {
    std::shared_ptr<sampler_handle> h = with ? with->handle() : nullptr;
    std::optional<sampler_claim> claim;
    if (h) claim.emplace(h);
    pi_sampler* s = h ? h->sampler : nullptr;
    pi_status status = PI_OK;
    std::string error;
    {
        py::gil_scoped_release nogil;
        status = call(s);
        if (status != PI_OK) error = last_error_message(status);
    }
    if (status != PI_OK) throw status_error(status, error);
}

} // namespace

void context::take_restored_logits(context_state& s) {
    const float* restored = pi_get_logits(s.ctx, -1);
    s.has_logits = restored != nullptr;
    if (restored) std::copy_n(restored, s.logits->size(), s.logits->begin());
}

py::bytes context::save_state(int32_t seq, const sampler* with) const {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, seq, true);
    std::string blob;
    run_state_call(with, [&](pi_sampler* smp) {
        size_t len = 0;
        const pi_status asked = pi_context_state_save(s->ctx, seq, smp, nullptr, 0, &len);
        if (asked != PI_OK && !(asked == PI_ERR_INVALID_ARGUMENT && len > 0)) return asked;
        blob.resize(len);
        const pi_status status =
            pi_context_state_save(s->ctx, seq, smp, blob.data(), blob.size(), &len);
        blob.resize(len);
        return status;
    });
    return py::bytes(blob);
}

void context::load_state(const py::bytes& data, int32_t seq, const sampler* with) {
    const std::shared_ptr<context_state> s = state();
    busy_guard busy(*s);
    require_sequence(*s, seq, true);
    const std::string_view blob = data;
    run_state_call(with, [&](pi_sampler* smp) {
        return pi_context_state_load(s->ctx, seq, smp, blob.data(), blob.size());
    });
    take_restored_logits(*s);
}

void context::save_state_file(const std::string& path, int32_t seq, const sampler* with) const {
    const std::shared_ptr<context_state> s = state();
    require_no_nul(path, "the state file path");
    busy_guard busy(*s);
    require_sequence(*s, seq, true);
    run_state_call(with, [&](pi_sampler* smp) {
        return pi_context_state_save_file(s->ctx, seq, smp, path.c_str());
    });
}

void context::load_state_file(const std::string& path, int32_t seq, const sampler* with) {
    const std::shared_ptr<context_state> s = state();
    require_no_nul(path, "the state file path");
    busy_guard busy(*s);
    require_sequence(*s, seq, true);
    run_state_call(with, [&](pi_sampler* smp) {
        return pi_context_state_load_file(s->ctx, seq, smp, path.c_str());
    });
    take_restored_logits(*s);
}

void bind_context_saved_state(py::class_<context>& c) {
    c.def("save_state", &context::save_state, py::arg("seq"), py::arg("sampler").none(true))
        .def("load_state", &context::load_state, py::arg("data"), py::arg("seq"),
             py::arg("sampler").none(true))
        .def(
            "save_state_file",
            [](const context& self, const py::bytes& path, int32_t seq, const sampler* with) {
                self.save_state_file(std::string(path), seq, with);
            },
            py::arg("path"), py::arg("seq"), py::arg("sampler").none(true))
        .def(
            "load_state_file",
            [](context& self, const py::bytes& path, int32_t seq, const sampler* with) {
                self.load_state_file(std::string(path), seq, with);
            },
            py::arg("path"), py::arg("seq"), py::arg("sampler").none(true));
}

} // namespace pi::python
