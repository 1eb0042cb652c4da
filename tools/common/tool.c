#define _POSIX_C_SOURCE 200809L /* clock_gettime in strict C99 */

#include "tool.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

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

double tool_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}
