#include "tool.h"

#include "platform/console.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void note(const char* format, va_list args) {
    fprintf(stderr, "%s: ", tool_name);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
}

void tool_note(const char* format, ...) {
    va_list args;
    va_start(args, format);
    note(format, args);
    va_end(args);
}

int tool_fail(int exit_status, const char* format, ...) {
    va_list args;
    va_start(args, format);
    note(format, args);
    va_end(args);
    return exit_status;
}

int tool_fail_status(const char* what, pi_status status) {
    if (what) return tool_fail(1, "%s: %s: %s", what, pi_status_str(status), pi_last_error());
    return tool_fail(1, "%s: %s", pi_status_str(status), pi_last_error());
}

void tool_log_to_stderr(pi_log_level level, const char* message, void* user_data) {
    static const char* const names[] = {"debug", "info", "warning", "error"};
    (void)user_data;
    tool_note("%s: %s", names[level & 3], message);
}

char* tool_read_file(const char* path, size_t* len) {
    FILE* f = platform_fopen(path, "rb");
    if (!f) return NULL;
    errno = 0; /* so that a read error which sets none is still told apart below */
    size_t cap = 1 << 16, used = 0, n;
    char* buf = malloc(cap);
    /* One byte is always kept free for the terminating '\0'. */
    while (buf && (n = fread(buf + used, 1, cap - used - 1, f)) > 0) {
        used += n;
        if (used == cap - 1) {
            char* bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    /* A read error must not pass for the end of the file: the caller would get part of it. */
    const int bad = ferror(f);
    int cause = errno;
    if (!buf) cause = ENOMEM;
    else if (bad && cause == 0) cause = EIO;
    fclose(f);
    if (!buf || bad) {
        free(buf);
        errno = cause;
        return NULL;
    }
    buf[used] = '\0';
    if (len) *len = used;
    return buf;
}

double tool_seconds(void) {
    return platform_seconds();
}
