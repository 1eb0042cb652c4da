/* powerinfer's interactive mode (-i, --chat): a conversation on stdin and stdout in which the
 * context keeps the transcript, so that each turn decodes only its own tokens. */
#ifndef PI_POWERINFER_CHAT_H
#define PI_POWERINFER_CHAT_H

#include "powerinfer.h"

typedef struct chat_options {
    const char* system;        /* the system message, or NULL */
    const char* chat_template; /* a template name or text; NULL: the model's */
    int max_tokens;            /* per reply */
    int context_shift;         /* 1: a full context drops old tokens instead of ending the reply */
    int keep;                  /* tokens a context shift keeps; < 0: the system message's */
    int verbose_prompt;        /* 1: each turn's prompt and decode statistics on stderr */
} chat_options;

/* Reads one user message per line until EOF or "/exit", streams each reply to stdout and
 * returns the exit status (0, or 1 after a message on stderr). Ctrl-C stops the current reply;
 * at the prompt it ends the chat. */
int chat_run(pi_model* model, pi_context* ctx, const chat_options* o,
             const pi_sampler_params* sampler);

#endif
