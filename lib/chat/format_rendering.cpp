// Writing a conversation out in each chat format, byte for byte as llama.cpp's built-in
// renderings do (docs/chat-templates.md, "Renderings").
#include <cctype>
#include <span>
#include <string>
#include <string_view>

#include "chat/chat_format.hpp"

namespace pi {
namespace {

// Leading and trailing ASCII whitespace removed (C isspace), as llama.cpp trims.
std::string_view trimmed(std::string_view s) noexcept {
    const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!s.empty() && space(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && space(s.back()))
        s.remove_suffix(1);
    return s;
}

// The formats that open each turn with a tag around the role and close it with an end tag; the
// assistant's opening is the same tag around "assistant".
struct role_tags {
    std::string_view open;
    std::string_view after_role;
    std::string_view end;
    bool trim; // content with its surrounding whitespace removed
};

std::string role_tagged(const role_tags& tags, std::span<const chat_message> messages,
                        bool add_assistant) {
    std::string out;
    for (const chat_message& m : messages) {
        out += tags.open;
        out += m.role;
        out += tags.after_role;
        out += tags.trim ? trimmed(m.content) : m.content;
        out += tags.end;
    }
    if (add_assistant) {
        out += tags.open;
        out += "assistant";
        out += tags.after_role;
    }
    return out;
}

// Every user turn ends in " [/INST]", which is already the assistant's opening, so
// add_assistant changes nothing; roles other than system and user are the assistant's.
std::string llama2(chat_format f, std::span<const chat_message> messages) {
    const bool sys_block = f != chat_format::llama2;
    const bool bos_in_history = f == chat_format::llama2_sys_bos;
    const bool strip = f == chat_format::llama2_sys_strip;
    std::string out = "[INST] "; // no BOS: the tokenizer adds the first one
    bool in_turn = true;
    for (const chat_message& m : messages) {
        const std::string_view content = strip ? trimmed(m.content) : m.content;
        if (!in_turn) {
            out += bos_in_history ? "<s>[INST] " : "[INST] ";
            in_turn = true;
        }
        if (m.role == "system") {
            if (sys_block) {
                out += "<<SYS>>\n";
                out += content;
                out += "\n<</SYS>>\n\n";
            } else {
                out += content;
                out += '\n';
            }
        } else if (m.role == "user") {
            out += content;
            out += " [/INST]";
        } else {
            out += content;
            out += "</s>";
            in_turn = false;
        }
    }
    return out;
}

// v1 puts a space before [INST] and [/INST], tekken none after [INST] nor before the answer, v3
// trims the answer. Like llama2, the user turn's end opens the assistant's.
std::string mistral_v1_v3(chat_format f, std::span<const chat_message> messages) {
    const std::string_view before = f == chat_format::mistral_v1 ? " " : "";
    const std::string_view after = f == chat_format::mistral_v3_tekken ? "" : " ";
    const bool trim_answer = f == chat_format::mistral_v3;
    std::string out;
    bool in_turn = false;
    for (const chat_message& m : messages) {
        if (!in_turn) {
            out += before;
            out += "[INST]";
            out += after;
            in_turn = true;
        }
        if (m.role == "system") {
            out += m.content;
            out += "\n\n";
        } else if (m.role == "user") {
            out += m.content;
            out += before;
            out += "[/INST]";
        } else {
            out += after;
            out += trim_answer ? trimmed(m.content) : m.content;
            out += "</s>";
            in_turn = false;
        }
    }
    return out;
}

std::string mistral_v7(chat_format f, std::span<const chat_message> messages) {
    const std::string_view space = f == chat_format::mistral_v7 ? " " : "";
    std::string out;
    for (const chat_message& m : messages) {
        if (m.role == "system") {
            out += "[SYSTEM_PROMPT]";
            out += space;
            out += m.content;
            out += "[/SYSTEM_PROMPT]";
        } else if (m.role == "user") {
            out += "[INST]";
            out += space;
            out += m.content;
            out += "[/INST]";
        } else {
            out += space;
            out += m.content;
            out += "</s>";
        }
    }
    return out;
}

// Roles other than system, user and assistant are left out.
std::string vicuna(chat_format f, std::span<const chat_message> messages, bool add_assistant) {
    std::string out;
    for (const chat_message& m : messages) {
        if (m.role == "system") {
            if (f == chat_format::vicuna_orca) {
                out += "SYSTEM: ";
                out += m.content;
                out += '\n';
            } else {
                out += m.content;
                out += "\n\n";
            }
        } else if (m.role == "user") {
            out += "USER: ";
            out += m.content;
            out += '\n';
        } else if (m.role == "assistant") {
            out += "ASSISTANT: ";
            out += m.content;
            out += "</s>\n";
        }
    }
    if (add_assistant) out += "ASSISTANT:";
    return out;
}

} // namespace

std::string render_chat(chat_format f, std::span<const chat_message> messages, bool add_assistant) {
    switch (f) {
    case chat_format::chatml:
        return role_tagged({"<|im_start|>", "\n", "<|im_end|>\n", false}, messages, add_assistant);
    case chat_format::llama2:
    case chat_format::llama2_sys:
    case chat_format::llama2_sys_bos:
    case chat_format::llama2_sys_strip:
        return llama2(f, messages);
    case chat_format::mistral_v1:
    case chat_format::mistral_v3:
    case chat_format::mistral_v3_tekken:
        return mistral_v1_v3(f, messages);
    case chat_format::mistral_v7:
    case chat_format::mistral_v7_tekken:
        return mistral_v7(f, messages);
    case chat_format::zephyr:
        return role_tagged({"<|", "|>\n", "<|endoftext|>\n", false}, messages, add_assistant);
    case chat_format::vicuna:
    case chat_format::vicuna_orca:
        return vicuna(f, messages, add_assistant);
    case chat_format::llama3:
        return role_tagged({"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", true},
                           messages, add_assistant);
    }
    return {};
}

} // namespace pi
