// Special-token tokenizing, the end-of-generation queries and chat templates
// (docs/tokenizer.md, docs/chat-templates.md).
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "chat/chat_format.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace pi;
using pi::api::guard;
using pi::api::require;

namespace {

constexpr uint32_t known_tokenize_flags = PI_TOKENIZE_ADD_BOS | PI_TOKENIZE_PARSE_SPECIAL;

// tmpl NULL: the model's own template, which needs the model.
chat_format chosen_format(const pi_model* model, const char* tmpl) {
    if (tmpl) return chat_format_from(tmpl);
    if (!model)
        fail(status::invalid_argument,
             "argument 'model' is NULL and no template is given: one of them is needed");
    return chat_format_of_model(model->impl->vocab().vocabulary().chat_template);
}

// pi_detokenize's contract: *len is the text's size without the NUL, even when it does not fit.
pi_status write_text(const std::string& text, char* buf, size_t capacity, size_t* len) {
    api::write_c_string(text, buf, capacity, len, "text");
    return PI_OK;
}

void check_text_buffer(char* buf, size_t capacity, size_t* len) {
    require(len, "len");
    *len = 0;
    if (!buf && capacity > 0) fail(status::invalid_argument, "argument 'buf' is NULL");
}

} // namespace

extern "C" {

pi_status pi_tokenize_with_flags(const pi_model* model, const char* text, size_t text_len,
                                 uint32_t flags, pi_token* tokens, size_t capacity,
                                 size_t* n_tokens) {
    return guard([&] {
        require(model, "model");
        require(n_tokens, "n_tokens");
        *n_tokens = 0;
        if (flags & ~known_tokenize_flags)
            fail(status::invalid_argument, "flags = ", flags, " has bits ",
                 flags & ~known_tokenize_flags,
                 " that are not PI_TOKENIZE_ADD_BOS (1) or PI_TOKENIZE_PARSE_SPECIAL (2)");
        if (!text && text_len > 0) fail(status::invalid_argument, "argument 'text' is NULL");
        if (!tokens && capacity > 0) fail(status::invalid_argument, "argument 'tokens' is NULL");
        const std::vector<int32_t> ids = model->impl->vocab().encode(
            std::string_view(text ? text : "", text_len), (flags & PI_TOKENIZE_ADD_BOS) != 0,
            (flags & PI_TOKENIZE_PARSE_SPECIAL) != 0);
        *n_tokens = ids.size();
        if (ids.size() > capacity)
            fail(status::invalid_argument, "token buffer holds ", capacity, " tokens, ", ids.size(),
                 " needed");
        std::copy(ids.begin(), ids.end(), tokens);
        return PI_OK;
    });
}

pi_token pi_token_eot(const pi_model* model) {
    return model ? model->impl->vocab().vocabulary().eot : -1;
}

int32_t pi_token_is_eog(const pi_model* model, pi_token token) {
    return model && model->impl->vocab().is_eog(token) ? 1 : 0;
}

pi_status pi_chat_apply_template(const pi_model* model, const char* tmpl,
                                 const pi_chat_message* messages, size_t n_messages,
                                 int32_t add_assistant, char* buf, size_t capacity, size_t* len) {
    return guard([&] {
        check_text_buffer(buf, capacity, len);
        if (!messages && n_messages > 0)
            fail(status::invalid_argument, "argument 'messages' is NULL but n_messages is ",
                 n_messages);
        std::vector<chat_message> chat;
        chat.reserve(n_messages);
        for (size_t i = 0; i < n_messages; ++i) {
            if (!messages[i].role) fail(status::invalid_argument, "messages[", i, "].role is NULL");
            if (!messages[i].content)
                fail(status::invalid_argument, "messages[", i, "].content is NULL");
            chat.push_back({messages[i].role, messages[i].content});
        }
        const chat_format format = chosen_format(model, tmpl);
        return write_text(render_chat(format, chat, add_assistant != 0), buf, capacity, len);
    });
}

pi_status pi_chat_template_name(const pi_model* model, const char* tmpl, char* buf, size_t capacity,
                                size_t* len) {
    return guard([&] {
        check_text_buffer(buf, capacity, len);
        return write_text(std::string(chat_format_name(chosen_format(model, tmpl))), buf, capacity,
                          len);
    });
}

} // extern "C"
