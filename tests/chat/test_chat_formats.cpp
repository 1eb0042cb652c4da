// Chat formats: each rendering byte for byte (docs/chat-templates.md), the names, the detection
// of Jinja templates by their substrings, and the errors for what is not recognised.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "chat/chat_format.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

namespace {

using pi::chat_format;
using pi::test::code_of;
using pi::test::message_of;

// System, user, assistant, user; the answer's surrounding spaces show which formats trim.
const std::vector<pi::chat_message> conversation = {
    {"system", "Be brief."},
    {"user", "Hi"},
    {"assistant", "  Hello!  "},
    {"user", "Who are you?"},
};

std::string render(const char* name, bool add_assistant) {
    return pi::render_chat(pi::chat_format_from(name), conversation, add_assistant);
}

} // namespace

TEST_CASE("chatml wraps every message in im_start and im_end") {
    const std::string body = "<|im_start|>system\nBe brief.<|im_end|>\n"
                             "<|im_start|>user\nHi<|im_end|>\n"
                             "<|im_start|>assistant\n  Hello!  <|im_end|>\n"
                             "<|im_start|>user\nWho are you?<|im_end|>\n";
    CHECK(render("chatml", false) == body);
    CHECK(render("chatml", true) == body + "<|im_start|>assistant\n");
}

TEST_CASE("llama2 renders the system text plainly, in <<SYS>>, with <s> or trimmed") {
    CHECK(render("llama2", true) == "[INST] Be brief.\nHi [/INST]  Hello!  </s>"
                                    "[INST] Who are you? [/INST]");
    CHECK(render("llama2-sys", true) == "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n"
                                        "Hi [/INST]  Hello!  </s>[INST] Who are you? [/INST]");
    CHECK(render("llama2-sys-bos", true) ==
          "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n"
          "Hi [/INST]  Hello!  </s><s>[INST] Who are you? [/INST]");
    CHECK(render("llama2-sys-strip", true) == "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n"
                                              "Hi [/INST]Hello!</s>[INST] Who are you? [/INST]");
    // " [/INST]" already opens the assistant's turn.
    for (const char* name : {"llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip"}) {
        CAPTURE(name);
        CHECK(render(name, false) == render(name, true));
    }
}

TEST_CASE("mistral v1, v3 and v3-tekken differ in their spaces and trimming") {
    CHECK(render("mistral-v1", true) ==
          " [INST] Be brief.\n\nHi [/INST]   Hello!  </s> [INST] Who are you? [/INST]");
    CHECK(render("mistral-v3", true) ==
          "[INST] Be brief.\n\nHi[/INST] Hello!</s>[INST] Who are you?[/INST]");
    CHECK(render("mistral-v3-tekken", true) ==
          "[INST]Be brief.\n\nHi[/INST]  Hello!  </s>[INST]Who are you?[/INST]");
    for (const char* name : {"mistral-v1", "mistral-v3", "mistral-v3-tekken"}) {
        CAPTURE(name);
        CHECK(render(name, false) == render(name, true));
    }
}

TEST_CASE("mistral v7 has a system prompt block; the name mistral is llama2") {
    CHECK(render("mistral-v7", true) == "[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST] Hi[/INST]"
                                        "   Hello!  </s>[INST] Who are you?[/INST]");
    CHECK(render("mistral-v7-tekken", false) ==
          "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]  Hello!  </s>"
          "[INST]Who are you?[/INST]");
    CHECK(pi::chat_format_from("mistral") == chat_format::llama2);
}

TEST_CASE("zephyr ends every message with <|endoftext|>") {
    const std::string body = "<|system|>\nBe brief.<|endoftext|>\n"
                             "<|user|>\nHi<|endoftext|>\n"
                             "<|assistant|>\n  Hello!  <|endoftext|>\n"
                             "<|user|>\nWho are you?<|endoftext|>\n";
    CHECK(render("zephyr", false) == body);
    CHECK(render("zephyr", true) == body + "<|assistant|>\n");
}

TEST_CASE("vicuna writes USER and ASSISTANT turns; the orca variant a SYSTEM line") {
    CHECK(render("vicuna", true) ==
          "Be brief.\n\nUSER: Hi\nASSISTANT:   Hello!  </s>\nUSER: Who are you?\nASSISTANT:");
    CHECK(render("vicuna", false) ==
          "Be brief.\n\nUSER: Hi\nASSISTANT:   Hello!  </s>\nUSER: Who are you?\n");
    CHECK(render("vicuna-orca", true) ==
          "SYSTEM: Be brief.\nUSER: Hi\nASSISTANT:   Hello!  </s>\nUSER: Who are you?\nASSISTANT:");
    // Roles it does not know are left out.
    const std::vector<pi::chat_message> tool = {{"tool", "42"}, {"user", "Hi"}};
    CHECK(pi::render_chat(chat_format::vicuna, tool, false) == "USER: Hi\n");
}

TEST_CASE("llama3 puts each trimmed message under a header and ends it with <|eot_id|>") {
    const std::string body = "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                             "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                             "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>";
    CHECK(render("llama3", false) == body);
    CHECK(render("llama3", true) == body + "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("an empty conversation gives only the assistant's opening") {
    CHECK(pi::render_chat(chat_format::chatml, {}, true) == "<|im_start|>assistant\n");
    CHECK(pi::render_chat(chat_format::chatml, {}, false).empty());
    CHECK(pi::render_chat(chat_format::llama2, {}, true) == "[INST] ");
}

TEST_CASE("every format's name reads back as that format") {
    for (const char* name : {"chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
                             "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
                             "mistral-v7-tekken", "zephyr", "vicuna", "vicuna-orca", "llama3"}) {
        CAPTURE(name);
        CHECK(pi::chat_format_name(pi::chat_format_from(name)) == name);
    }
}

TEST_CASE("Jinja templates are recognised by their distinctive substrings") {
    const struct {
        const char* jinja;
        chat_format expected;
    } cases[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
         "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
         chat_format::chatml},
        {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
         "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
         "{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
         chat_format::llama2},
        {"{% if message['role'] == 'system' %}{{ '<<SYS>>\\n' + message['content'] + "
         "'\\n<</SYS>>\\n\\n' }}{% else %}{{ '[INST] ' + message['content'] }}{% endif %}",
         chat_format::llama2_sys},
        {"{% if loop.index0 > 1 %}{{ bos_token + '[INST] ' + message['content'] }}{% endif %}"
         "{{ '<<SYS>>\\n' }}",
         chat_format::llama2_sys_bos},
        {"{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{{ '<<SYS>>\\n' }}",
         chat_format::llama2_sys_strip},
        {"{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + "
         "'\\n\\n' + message['content'] + ' [/INST]' }}{%- endif %}",
         chat_format::mistral_v1},
        {"{{- '[AVAILABLE_TOOLS] [' }}{{- '[INST] ' + message['content'] + '[/INST]' }}",
         chat_format::mistral_v3},
        {"{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}",
         chat_format::mistral_v3_tekken},
        {"{{- '[SYSTEM_PROMPT] ' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST] ' }}",
         chat_format::mistral_v7},
        {"{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + "
         "'<|endoftext|>\\n' }}{% else %}{{ '<|' + message['role'] + '|>\\n' }}{% endif %}",
         chat_format::zephyr},
        {"{%- if message['role'] == 'user' -%}{{- 'USER: ' + message['content'] + '\\n' -}}"
         "{%- else -%}{{- 'ASSISTANT: ' + message['content'] + '</s>\\n' -}}{%- endif -%}",
         chat_format::vicuna},
        {"{{- 'SYSTEM: ' + message['content'] -}}{{- 'USER: ' -}}{{- 'ASSISTANT: ' -}}",
         chat_format::vicuna_orca},
        {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
         "message['content'] | trim + '<|eot_id|>' %}{{ content }}",
         chat_format::llama3},
    };
    for (const auto& c : cases) {
        CAPTURE(c.jinja);
        CHECK(pi::chat_format_from(c.jinja) == c.expected);
        CHECK(pi::chat_format_of_model(c.jinja) == c.expected);
    }
}

TEST_CASE("an unrecognised template is unsupported, quoting its first 60 characters") {
    const std::string jinja =
        "{% for m in messages %}{{ '### ' + m['role'] + ': ' + m['content'] }}{% endfor %}";
    const auto apply = [&] { (void)pi::chat_format_from(jinja); };
    CHECK(code_of(apply) == pi::status::unsupported);
    CHECK(message_of(apply) == "chat template not recognised: " + jinja.substr(0, 60) + "...");
    const std::string short_jinja = "{{ messages }}";
    CHECK(message_of([&] { (void)pi::chat_format_from(short_jinja); }) ==
          "chat template not recognised: {{ messages }}");
}

TEST_CASE("a template of a family that is not rendered here names the family") {
    // Zephyr-7B-beta's own template has <|user|> and <|assistant|> but no <|endoftext|>: llama.cpp
    // takes it for GLM-Edge, whose rendering differs, so it is not taken for zephyr either.
    const std::string glmedge = "{{ '<|user|>\\n' + message['content'] + eos_token }}"
                                "{{ '<|assistant|>\\n' }}";
    const std::string phi3 = "{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + "
                             "'<|end|>\\n' }}{{ '<|assistant|>\\n' }}";
    for (const std::string& t : {glmedge, phi3}) {
        CAPTURE(t);
        const auto apply = [&] { (void)pi::chat_format_from(t); };
        CHECK(code_of(apply) == pi::status::unsupported);
        CHECK(message_of(apply).starts_with("chat template not recognised: it looks like"));
    }
    CHECK(message_of([&] { (void)pi::chat_format_from(glmedge); }).find("'glmedge'") !=
          std::string::npos);
    CHECK(message_of([&] { (void)pi::chat_format_from(phi3); }).find("'phi3'") !=
          std::string::npos);
}

TEST_CASE("an unknown name is unsupported naming it; a model without a template says so") {
    const auto by_name = [] { (void)pi::chat_format_from("gemma"); };
    CHECK(code_of(by_name) == pi::status::unsupported);
    CHECK(message_of(by_name).find("unknown chat template name 'gemma'") != std::string::npos);
    CHECK(message_of(by_name).find("chatml") != std::string::npos); // lists the known ones
    CHECK(code_of([] { (void)pi::chat_format_from(""); }) == pi::status::unsupported);

    const auto none = [] { (void)pi::chat_format_of_model(""); };
    CHECK(code_of(none) == pi::status::unsupported);
    CHECK(message_of(none).find("the model has no chat template") != std::string::npos);
    CHECK(pi::chat_format_of_model("chatml") == chat_format::chatml);
}
