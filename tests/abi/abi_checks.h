/*
 * What the ABI programs share: a CHECK that counts failures and prints pi_last_error(), and a
 * text buffer for pi_generate's callback. Include it after one powerinfer header (today's or a
 * frozen one): it uses only what every version declares.
 */
#ifndef PI_ABI_CHECKS_H
#define PI_ABI_CHECKS_H

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; pi_last_error: \"%s\"\n", __FILE__,          \
                    __LINE__, #cond, pi_last_error());                                             \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct text_buffer {
    char text[4096];
    size_t len;
    int stop_after_first; /* return 0 from the first callback */
} text_buffer;

static int collect(const char* text, size_t len, void* user_data) {
    text_buffer* buffer = (text_buffer*)user_data;
    if (len > sizeof buffer->text - 1 - buffer->len) len = sizeof buffer->text - 1 - buffer->len;
    memcpy(buffer->text + buffer->len, text, len);
    buffer->len += len;
    buffer->text[buffer->len] = '\0';
    return !buffer->stop_after_first;
}

#endif /* PI_ABI_CHECKS_H */
