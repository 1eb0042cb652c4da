#include "chat.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/console.h"
#include "tool.h"

/* A growing byte string. */
typedef struct text {
    char* data;
    size_t len, cap;
} text;

static int text_append(text* t, const char* bytes, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char* grown = realloc(t->data, cap);
        if (!grown) return 0;
        t->data = grown;
        t->cap = cap;
    }
    memcpy(t->data + t->len, bytes, n);
    t->len += n;
    t->data[t->len] = '\0';
    return 1;
}

/* The conversation so far; every content is owned. */
typedef struct transcript {
    pi_chat_message* messages;
    size_t n, cap;
    size_t first_droppable; /* 1 after a system message: it is never dropped */
} transcript;

static int transcript_add(transcript* t, const char* role, const char* content) {
    if (t->n == t->cap) {
        const size_t cap = t->cap ? 2 * t->cap : 16;
        pi_chat_message* grown = realloc(t->messages, cap * sizeof *grown);
        if (!grown) return 0;
        t->messages = grown;
        t->cap = cap;
    }
    char* copy = malloc(strlen(content) + 1);
    if (!copy) return 0;
    strcpy(copy, content);
    t->messages[t->n].role = role;
    t->messages[t->n].content = copy;
    ++t->n;
    return 1;
}

/* Forgets the oldest exchange after the system message (a user message and the reply to it);
 * 0 when only the current user message is left. */
static int transcript_drop_oldest(transcript* t) {
    size_t drop = 0;
    while (t->first_droppable + drop + 1 < t->n &&
           (drop == 0 || strcmp(t->messages[t->first_droppable + drop].role, "user") != 0))
        ++drop;
    if (drop == 0) return 0;
    for (size_t i = 0; i < drop; ++i)
        free((char*)t->messages[t->first_droppable + i].content);
    memmove(t->messages + t->first_droppable, t->messages + t->first_droppable + drop,
            (t->n - t->first_droppable - drop) * sizeof *t->messages);
    t->n -= drop;
    return 1;
}

static void transcript_free(transcript* t) {
    for (size_t i = 0; i < t->n; ++i)
        free((char*)t->messages[i].content);
    free(t->messages);
}

/* The first n messages through the chat template into out, which grows to hold them; with
 * add_assistant, ending with the opening of the assistant's turn. */
static pi_status render(const pi_model* model, const char* tmpl, const transcript* t, size_t n,
                        int add_assistant, text* out) {
    size_t len = 0;
    pi_status st = pi_chat_apply_template(model, tmpl, t->messages, n, add_assistant, out->data,
                                          out->cap, &len);
    if (st == PI_ERR_INVALID_ARGUMENT && len + 1 > out->cap) {
        char* grown = realloc(out->data, len + 1);
        if (!grown) return PI_ERR_OUT_OF_MEMORY;
        out->data = grown;
        out->cap = len + 1;
        st = pi_chat_apply_template(model, tmpl, t->messages, n, add_assistant, out->data, out->cap,
                                    &len);
    }
    if (st == PI_OK) out->len = len;
    return st;
}

/* What a model that lacks the template's end-of-turn token as a control token would write at
 * the end of its turn, as text: the reply stops there too. */
static const struct {
    const char* name;
    const char* stop[2];
} template_stops[] = {
    {"chatml", {"<|im_end|>", "<|im_start|>"}},
    {"llama2", {"</s>", "[INST]"}},
    {"mistral", {"</s>", "[INST]"}},
    {"vicuna", {"</s>", "\nUSER:"}},
    {"zephyr", {"</s>", "<|user|>"}},
    {"llama3", {"<|eot_id|>", "<|start_header_id|>"}},
};

static const char* const* stops_of(const char* template_name) {
    for (size_t i = 0; i < sizeof template_stops / sizeof template_stops[0]; ++i)
        if (strcmp(template_stops[i].name, template_name) == 0) return template_stops[i].stop;
    return NULL;
}

/* Lock-free atomics would be C11; a sig_atomic_t flag and pi_context_cancel (an atomic store in
 * the library) are what a C99 signal handler may touch. */
static pi_context* volatile g_ctx;
static volatile sig_atomic_t g_replying;

static void on_sigint(int signal_number) {
    (void)signal_number;
    if (g_replying) {
        g_replying = 0;
        pi_context_cancel(g_ctx);
    }
}

static int stream_reply(const char* piece, size_t len, void* user_data) {
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return text_append((text*)user_data, piece, len);
}

/* The prefix of the rendered text that the tokenizer turns into BOS. */
static int starts_with_bos(const pi_model* model, const char* rendered) {
    const pi_token bos = pi_token_bos(model);
    char piece[64];
    size_t len = 0;
    if (bos < 0 || pi_token_to_piece(model, bos, piece, sizeof piece, &len) != PI_OK || len == 0 ||
        len > sizeof piece)
        return 0;
    return strncmp(rendered, piece, len) == 0;
}

static void print_turn_stats(int turn, const pi_generate_result* r) {
    tool_note("turn %d: prompt %d tokens: %d new, %d cached, %.2f ms; reply %d tokens, %.2f "
              "tokens/s%s",
              turn, r->n_prompt_tokens, r->n_prompt_tokens - r->n_cached_tokens, r->n_cached_tokens,
              r->prompt_seconds * 1e3, r->n_generated_tokens,
              r->decode_seconds > 0 ? r->n_generated_tokens / r->decode_seconds : 0.0,
              r->n_context_shifts ? ", context shifted" : "");
}

/* The tokens of the rendered system message, which a context shift keeps: the start of every
 * rendered transcript (BOS included). 1 (the BOS) without a system message. */
static int system_tokens(const pi_model* model, const char* tmpl, const transcript* t) {
    if (t->first_droppable == 0) return 1;
    text system = {0};
    size_t n = 0;
    if (render(model, tmpl, t, 1, 0, &system) == PI_OK && system.len > 0) {
        const uint32_t bos = starts_with_bos(model, system.data) ? 0 : PI_TOKENIZE_ADD_BOS;
        pi_tokenize_with_flags(model, system.data, system.len, bos | PI_TOKENIZE_PARSE_SPECIAL,
                               NULL, 0, &n);
    }
    free(system.data);
    return n > 0 && n <= INT_MAX ? (int)n : 1;
}

/* One reply: renders the transcript, generates, and drops the oldest exchanges while the
 * transcript does not fit the context. */
static pi_status reply(pi_model* model, pi_context* ctx, const char* tmpl, pi_generate_params* gp,
                       transcript* t, text* rendered, text* answer, pi_generate_result* result) {
    while (1) {
        pi_status st = render(model, tmpl, t, t->n, 1, rendered);
        if (st != PI_OK) return st;
        gp->add_bos = starts_with_bos(model, rendered->data) ? 0 : 1;
        answer->len = 0;
        if (answer->data) answer->data[0] = '\0';
        g_replying = 1;
        st = pi_generate(ctx, rendered->data, gp, result);
        g_replying = 0;
        if (st != PI_ERR_CONTEXT_FULL || !transcript_drop_oldest(t)) return st;
        tool_note("the transcript no longer fits the context: dropping its oldest exchange");
    }
}

int chat_run(pi_model* model, pi_context* ctx, const chat_options* o,
             const pi_sampler_params* sampler) {
    char name[64];
    size_t name_len = 0;
    const char* tmpl = o->chat_template;
    pi_status st = pi_chat_template_name(model, tmpl, name, sizeof name, &name_len);
    if (st != PI_OK && tmpl) return tool_fail_status("the chat template", st);
    if (st != PI_OK) {
        /* As llama.cpp does with a model template it cannot render. */
        tool_note("the model's chat template: %s: %s; using chatml (--chat-template names "
                  "another)",
                  pi_status_str(st), pi_last_error());
        tmpl = "chatml";
        strcpy(name, tmpl);
    }
    if (o->verbose_prompt) tool_note("chat template: %s", name);

    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = o->max_tokens;
    gp.sampler_params = sampler;
    gp.reuse_cache = 1;
    gp.parse_special = 1;
    gp.context_shift = o->context_shift;
    gp.stop = stops_of(name);
    gp.n_stop = gp.stop ? 2 : 0;
    gp.callback = stream_reply;

    transcript t = {0};
    text rendered = {0}, answer = {0};
    gp.user_data = &answer;
    int status = 0;
    if (o->system && *o->system) {
        if (!transcript_add(&t, "system", o->system)) status = tool_fail(1, "out of memory");
        t.first_droppable = 1;
    }
    gp.n_keep = o->keep >= 0 ? o->keep : system_tokens(model, tmpl, &t);

    g_ctx = ctx;
    platform_interrupt_catch(on_sigint); /* Ctrl-C at the prompt ends the read */

    const int echo = !platform_is_terminal(stdin); /* a piped conversation still reads as one */
    char* line = NULL;
    size_t line_cap = 0;
    for (int turn = 1; status == 0; ++turn) {
        fputs("> ", stdout);
        fflush(stdout);
        const long n = platform_read_line(&line, &line_cap, stdin);
        if (n < 0) {
            fputc('\n', stdout);
            if (ferror(stdin) && errno != EINTR)
                status = tool_fail(1, "reading stdin: %s", strerror(errno));
            break;
        }
        size_t len = (size_t)n;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (echo) printf("%s\n", line);
        if (strcmp(line, "/exit") == 0) break;
        if (len == 0) {
            --turn;
            continue;
        }
        if (!transcript_add(&t, "user", line)) {
            status = tool_fail(1, "out of memory");
            break;
        }
        pi_generate_result result;
        memset(&result, 0, sizeof result);
        result.struct_size = sizeof result;
        st = reply(model, ctx, tmpl, &gp, &t, &rendered, &answer, &result);
        if (st < 0) {
            fputc('\n', stdout);
            status = st == PI_ERR_CONTEXT_FULL
                         ? tool_fail(1, "turn %d does not fit the context (-c): %s", turn,
                                     pi_last_error())
                         : tool_fail_status("generating", st);
            break;
        }
        fputs(st == PI_STATUS_CANCELLED ? " [stopped]\n" : "\n", stdout);
        fflush(stdout); /* before the statistics on stderr */
        if (!transcript_add(&t, "assistant", answer.data ? answer.data : "")) {
            status = tool_fail(1, "out of memory");
            break;
        }
        if (o->verbose_prompt) print_turn_stats(turn, &result);
        if (result.stop_reason == PI_STOP_CONTEXT_FULL)
            tool_note("the context is full (-c, or --context-shift to go on)");
    }
    platform_interrupt_restore();
    free(line);
    free(rendered.data);
    free(answer.data);
    transcript_free(&t);
    return status;
}
