#pragma once
// Chat formats: a conversation written out as the text a model was tuned on, for the formats
// that llama.cpp renders without a Jinja engine, found from a model's tokenizer.chat_template by
// its distinctive substrings or chosen by name (docs/chat-templates.md).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace pi {

enum class chat_format : uint8_t {
    chatml,
    llama2,           // system text as a plain first line
    llama2_sys,       // system text inside <<SYS>> ... <</SYS>>
    llama2_sys_bos,   // and "<s>" before each later [INST]
    llama2_sys_strip, // and every content trimmed
    mistral_v1,
    mistral_v3,
    mistral_v3_tekken,
    mistral_v7,
    mistral_v7_tekken,
    zephyr,
    vicuna,
    vicuna_orca,
    llama3,
};

struct chat_message {
    std::string_view role; // "system", "user", "assistant" (others as each format treats them)
    std::string_view content;
};

// The format `name_or_template` names: a format name (chat_format_name's, or "mistral", which
// is llama.cpp's llama2 rendering), or a Jinja template text recognised by its substrings.
// Throws pi::error(status::unsupported): an unknown name names it; an unrecognised template
// quotes its first 60 characters.
chat_format chat_format_from(std::string_view name_or_template);

// The format of a model's tokenizer.chat_template; "" (the model has none) throws
// pi::error(status::unsupported) saying so.
chat_format chat_format_of_model(std::string_view model_template);

std::string_view chat_format_name(chat_format f) noexcept;

// The conversation in format f. With add_assistant, it ends with the opening of the assistant's
// turn where the format has one (llama2 and mistral end every user turn with it already).
std::string render_chat(chat_format f, std::span<const chat_message> messages, bool add_assistant);

} // namespace pi
