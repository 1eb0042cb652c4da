#include "sampler.hpp"

#include <string>

#include "errors.hpp"

namespace py = pybind11;

namespace pi::python {

sampler_claim::sampler_claim(std::shared_ptr<sampler_handle> h) : handle_(std::move(h)) {
    bool expected = false;
    if (!handle_->busy.compare_exchange_strong(expected, true))
        throw status_error(PI_ERR_INVALID_ARGUMENT,
                           "the sampler is in use by another call or by an unfinished generation");
}

sampler_claim::~sampler_claim() {
    handle_->busy.store(false);
}

sampler::sampler(const model* m, const py::dict& fields) {
    const std::shared_ptr<const sampler_config> config = sampler_config::from_dict(fields);
    model_ptr owner = m ? m->handle() : nullptr;
    pi_sampler* created = nullptr;
    pi_status status = PI_OK;
    std::string error;
    {
        // Compiling a grammar or a JSON schema may take a while.
        py::gil_scoped_release nogil;
        status = owner ? pi_sampler_create_for_model(owner.get(), &config->params(), &created)
                       : pi_sampler_create(&config->params(), &created);
        if (status != PI_OK) error = last_error_message(status);
    }
    if (status != PI_OK) throw status_error(status, error);
    handle_ = std::make_shared<sampler_handle>(created, std::move(owner));
}

std::shared_ptr<sampler_handle> sampler::handle() const {
    if (!handle_) throw py::value_error("the sampler is closed");
    return handle_;
}

int32_t
sampler::sample(const py::array_t<float, py::array::c_style | py::array::forcecast>& logits) {
    const std::shared_ptr<sampler_handle> h = handle();
    if (logits.ndim() != 1)
        throw status_error(PI_ERR_INVALID_ARGUMENT, "sample() needs a 1-D array of logits, not " +
                                                        std::to_string(logits.ndim()) + "-D");
    const sampler_claim claim(h);
    pi_token token = -1;
    pi_status status = PI_OK;
    std::string error;
    {
        py::gil_scoped_release nogil;
        status = pi_sample(h->sampler, logits.data(), static_cast<int32_t>(logits.size()), &token);
        if (status != PI_OK) error = last_error_message(status);
    }
    if (status != PI_OK) throw status_error(status, error);
    return token;
}

void sampler::accept(int32_t token) {
    const std::shared_ptr<sampler_handle> h = handle();
    const sampler_claim claim(h);
    check(pi_sampler_accept(h->sampler, token));
}

void sampler::reset() {
    const std::shared_ptr<sampler_handle> h = handle();
    const sampler_claim claim(h);
    pi_sampler_reset(h->sampler);
}

py::bytes sampler::save_state() const {
    const std::shared_ptr<sampler_handle> h = handle();
    const sampler_claim claim(h);
    size_t len = 0;
    pi_status status = pi_sampler_state_save(h->sampler, nullptr, 0, &len);
    if (status != PI_OK && !(status == PI_ERR_INVALID_ARGUMENT && len > 0)) check(status);
    std::string blob(len, '\0');
    check(pi_sampler_state_save(h->sampler, blob.data(), blob.size(), &len));
    blob.resize(len);
    return py::bytes(blob);
}

void sampler::load_state(const py::bytes& data) {
    const std::shared_ptr<sampler_handle> h = handle();
    const sampler_claim claim(h);
    const std::string_view blob = data;
    check(pi_sampler_state_load(h->sampler, blob.data(), blob.size()));
}

void bind_sampler(py::module_& m) {
    py::class_<sampler>(m, "_Sampler")
        .def(py::init<const model*, const py::dict&>(), py::arg("model").none(true),
             py::arg("fields"))
        .def("close", &sampler::close)
        .def_property_readonly("closed", &sampler::closed)
        .def("sample", &sampler::sample, py::arg("logits"))
        .def("accept", &sampler::accept, py::arg("token"))
        .def("reset", &sampler::reset)
        .def("save_state", &sampler::save_state)
        .def("load_state", &sampler::load_state, py::arg("data"));
}

} // namespace pi::python
