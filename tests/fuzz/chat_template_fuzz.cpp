// Chat formats (docs/chat-templates.md) from an arbitrary template string, and render_chat over
// arbitrary messages. The first input byte: bit 0 is add_assistant, the rest picks the format
// rendered when the template is not recognised. After it come NUL-separated fields: the template
// (a name or a Jinja text), then role and content of up to 16 messages.
// Beyond "no crash": recognition fails only with pi::error(unsupported); a recognised format's
// name is recognised as that format again; a rendering contains the text of every system, user
// and assistant message (trimmed, since some formats trim), and with add_assistant it is the
// rendering without it plus the assistant's opening.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_format.hpp"
#include "fuzz_outcome.hpp"
#include "support/error.hpp"

namespace {

constexpr size_t max_messages = 16;

// As lib/chat trims: C isspace at both ends.
std::string_view trimmed(std::string_view s) {
    const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!s.empty() && space(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && space(s.back()))
        s.remove_suffix(1);
    return s;
}

int format_count() {
    static const int n = [] {
        int k = 0;
        while (pi::chat_format_name(static_cast<pi::chat_format>(k)) != "?")
            ++k;
        return k;
    }();
    return n;
}

std::optional<pi::chat_format> recognised(std::string_view tmpl) {
    try {
        return pi::chat_format_from(tmpl);
    } catch (const pi::error& e) {
        if (e.code() != pi::status::unsupported) __builtin_trap();
        return std::nullopt;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool add_assistant = data[0] & 1;
    std::vector<std::string_view> fields;
    std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    while (fields.size() < 1 + 2 * max_messages) {
        const size_t end = rest.find('\0');
        fields.push_back(rest.substr(0, end));
        if (end == std::string_view::npos) break;
        rest.remove_prefix(end + 1);
    }
    const std::string_view tmpl = fields[0];
    std::vector<pi::chat_message> messages;
    for (size_t i = 1; i + 1 < fields.size(); i += 2)
        messages.push_back({fields[i], fields[i + 1]});

    const std::optional<pi::chat_format> found = recognised(tmpl);
    if (found) {
        pi::fuzz::note_accepted();
        if (recognised(pi::chat_format_name(*found)) != found) __builtin_trap();
    }
    const pi::chat_format f =
        found ? *found : static_cast<pi::chat_format>((data[0] >> 1) % format_count());
    const std::string plain = pi::render_chat(f, messages, false);
    const std::string text = add_assistant ? pi::render_chat(f, messages, true) : plain;
    if (!text.starts_with(plain)) __builtin_trap();
    for (const pi::chat_message& m : messages)
        if ((m.role == "system" || m.role == "user" || m.role == "assistant") &&
            text.find(trimmed(m.content)) == std::string::npos)
            __builtin_trap();
    return 0;
}
