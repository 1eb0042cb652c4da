/* What every command-line tool shares besides its command line (tool_args.h): its name in front
 * of every line it writes to stderr, the library's log lines, and a monotonic clock. C99 and
 * POSIX, on the public API only, so that the C tools and pi-bench (C++) use the same code. */
#ifndef PI_TOOL_H
#define PI_TOOL_H

#include <stddef.h>

#include "powerinfer.h"
#include "tool_printf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each tool defines it once, next to main: const char tool_name[] = "pi-quantize"; */
extern const char tool_name[];

/* Writes "NAME: MESSAGE\n" on stderr. */
TOOL_PRINTF(1, 2)
void tool_note(const char* format, ...);

/* tool_note, then returns exit_status, so that `return tool_fail(1, ...);` ends main. */
TOOL_PRINTF(2, 3)
int tool_fail(int exit_status, const char* format, ...);

/* "NAME: WHAT: PI_ERR_...: pi_last_error()" (without "WHAT: " when what is NULL); returns 1. */
int tool_fail_status(const char* what, pi_status status);

/* A pi_log_callback: "NAME: LEVEL: MESSAGE" on stderr, LEVEL one of debug, info, warning, error. */
void tool_log_to_stderr(pi_log_level level, const char* message, void* user_data);

/* The whole file at path, read in binary and followed by a '\0' that *len (when len is not NULL)
 * does not count; the text itself may contain NUL bytes. The caller frees it. NULL when the file
 * cannot be opened, read or held in memory, with errno saying why, so that the caller words the
 * message: tool_fail(1, "-f: cannot read '%s': %s", path, strerror(errno)). */
char* tool_read_file(const char* path, size_t* len);

/* Seconds on a monotonic clock: only differences mean anything. */
double tool_seconds(void);

#ifdef __cplusplus
}
#endif

#endif
