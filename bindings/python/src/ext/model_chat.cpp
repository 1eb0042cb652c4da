// Model methods for chat templates (docs/chat-templates.md).
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "errors.hpp"
#include "model.hpp"
#include "text.hpp"

namespace py = pybind11;

namespace pi::python {

namespace {

// Calls fill(buf, capacity, &len) until the NUL-terminated text fits; the GIL is released.
template <typename Fill> std::string text_of(Fill&& fill) {
    std::string text(256, '\0');
    py::gil_scoped_release nogil;
    for (;;) {
        size_t len = 0;
        const pi_status status = fill(text.data(), text.size(), &len);
        if (status == PI_ERR_INVALID_ARGUMENT && len + 1 > text.size()) {
            text.resize(len + 1);
            continue;
        }
        check(status);
        text.resize(len);
        return text;
    }
}

} // namespace

py::str model::apply_chat_template(const std::vector<std::pair<std::string, std::string>>& messages,
                                   const std::optional<std::string>& tmpl,
                                   bool add_assistant) const {
    const model_ptr h = handle();
    if (tmpl) require_no_nul(*tmpl, "the chat template");
    std::vector<pi_chat_message> list;
    list.reserve(messages.size());
    for (const auto& [role, content] : messages) {
        require_no_nul(role, "a message's role");
        require_no_nul(content, "a message's content");
        list.push_back(pi_chat_message{role.c_str(), content.c_str()});
    }
    const std::string text = text_of([&](char* buf, size_t capacity, size_t* len) {
        return pi_chat_apply_template(h.get(), tmpl ? tmpl->c_str() : nullptr, list.data(),
                                      list.size(), add_assistant ? 1 : 0, buf, capacity, len);
    });
    return decode_utf8(text);
}

std::string model::chat_template_name(const std::optional<std::string>& tmpl) const {
    const model_ptr h = handle();
    if (tmpl) require_no_nul(*tmpl, "the chat template");
    return text_of([&](char* buf, size_t capacity, size_t* len) {
        return pi_chat_template_name(h.get(), tmpl ? tmpl->c_str() : nullptr, buf, capacity, len);
    });
}

void bind_model_chat(py::class_<model>& c) {
    c.def("apply_chat_template", &model::apply_chat_template, py::arg("messages"),
          py::arg("template").none(true), py::arg("add_assistant"))
        .def("chat_template_name", &model::chat_template_name, py::arg("template").none(true));
}

} // namespace pi::python
