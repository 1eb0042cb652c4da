// Finding a chat format from its name or from a Jinja template's distinctive substrings, in the
// order llama.cpp's detection tries them (docs/chat-templates.md, "Detection").
#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

#include "chat/chat_format.hpp"
#include "support/error.hpp"

namespace pi {
namespace {

struct named_format {
    std::string_view name;
    chat_format format;
};

// The names are llama.cpp's, so a template name means the same in both.
constexpr named_format formats[] = {
    {"chatml", chat_format::chatml},
    {"llama2", chat_format::llama2},
    {"llama2-sys", chat_format::llama2_sys},
    {"llama2-sys-bos", chat_format::llama2_sys_bos},
    {"llama2-sys-strip", chat_format::llama2_sys_strip},
    {"mistral-v1", chat_format::mistral_v1},
    {"mistral-v3", chat_format::mistral_v3},
    {"mistral-v3-tekken", chat_format::mistral_v3_tekken},
    {"mistral-v7", chat_format::mistral_v7},
    {"mistral-v7-tekken", chat_format::mistral_v7_tekken},
    {"zephyr", chat_format::zephyr},
    {"vicuna", chat_format::vicuna},
    {"vicuna-orca", chat_format::vicuna_orca},
    {"llama3", chat_format::llama3},
};

// llama.cpp reads a name that starts with "mistral" as a Mistral template with none of the
// v1/v3/v7 markers, which is its llama2 rendering.
constexpr std::string_view plain_mistral_name = "mistral";

const named_format* find_name(std::string_view name) noexcept {
    const auto it = std::find_if(std::begin(formats), std::end(formats),
                                 [&](const named_format& f) { return f.name == name; });
    return it == std::end(formats) ? nullptr : it;
}

std::string known_names() {
    std::string out;
    for (const named_format& f : formats) {
        out += f.name;
        out += ", ";
    }
    out += plain_mistral_name;
    return out;
}

// The llama.cpp family a template text belongs to, also for families this library does not
// render (so that, say, a Phi-3 template is not taken for a later rule's Zephyr); "" for none.
std::string_view detect_family(std::string_view tmpl) {
    const auto has = [&](std::string_view s) { return tmpl.find(s) != std::string_view::npos; };
    if (has("<|im_start|>")) {
        if (has("<|im_sep|>")) return "phi4";
        if (has("<end_of_utterance>")) return "smolvlm";
        return "chatml";
    }
    if (tmpl.starts_with(plain_mistral_name) || has("[INST]")) {
        if (has("[SYSTEM_PROMPT]")) return "mistral-v7";
        if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
            if (has(" [INST]")) return "mistral-v1";
            if (has("\"[INST]\"")) return "mistral-v3-tekken";
            return "mistral-v3";
        }
        if (has("content.strip()")) return "llama2-sys-strip";
        if (has("bos_token + '[INST]")) return "llama2-sys-bos";
        if (has("<<SYS>>")) return "llama2-sys";
        return "llama2";
    }
    if (has("<|assistant|>") && has("<|end|>")) return "phi3";
    if (has("[gMASK]<sop>")) return "chatglm4";
    if (has("<|assistant|>") && has("<|user|>")) return has("</s>") ? "falcon3" : "glmedge";
    if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return "glmedge";
    if (has("<|user|>") && has("<|endoftext|>")) return "zephyr";
    if (has("bos_token + message['role']")) return "monarch";
    if (has("<start_of_turn>")) return "gemma";
    if (has("'\\n\\nAssistant: ' + eos_token")) return "orion";
    if (has("GPT4 Correct ")) return "openchat";
    if (has("USER: ") && has("ASSISTANT: ")) return has("SYSTEM: ") ? "vicuna-orca" : "vicuna";
    if (has("### Instruction:") && has("<|EOT|>")) return "deepseek";
    if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return "command-r";
    if (has("<|start_header_id|>") && has("<|end_header_id|>")) return "llama3";
    return {};
}

std::string quoted_start(std::string_view tmpl) {
    constexpr size_t shown = 60;
    if (tmpl.size() <= shown) return std::string(tmpl);
    return std::string(tmpl.substr(0, shown)) + "...";
}

} // namespace

chat_format chat_format_from(std::string_view name_or_template) {
    // Template texts are Jinja; anything without Jinja's delimiters is taken as a name.
    const bool is_jinja = name_or_template.find("{{") != std::string_view::npos ||
                          name_or_template.find("{%") != std::string_view::npos;
    if (!is_jinja) {
        if (const named_format* f = find_name(name_or_template)) return f->format;
        if (name_or_template == plain_mistral_name) return chat_format::llama2;
        fail(status::unsupported, "unknown chat template name '", name_or_template,
             "' (known: ", known_names(), ")");
    }
    const std::string_view family = detect_family(name_or_template);
    if (family.empty())
        fail(status::unsupported, "chat template not recognised: ", quoted_start(name_or_template));
    if (const named_format* f = find_name(family)) return f->format;
    fail(status::unsupported, "chat template not recognised: it looks like llama.cpp's '", family,
         "', which libpowerinfer does not render: ", quoted_start(name_or_template));
}

chat_format chat_format_of_model(std::string_view model_template) {
    if (model_template.empty())
        fail(status::unsupported,
             "the model has no chat template (tokenizer.chat_template); name one of: ",
             known_names());
    return chat_format_from(model_template);
}

std::string_view chat_format_name(chat_format f) noexcept {
    for (const named_format& n : formats)
        if (n.format == f) return n.name;
    return "?";
}

} // namespace pi
