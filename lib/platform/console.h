/* The platform layer for the C tools: the clock, terminals, UTF-8 file names, reading a line and
 * Ctrl-C. Plain C99 so that tools/common and the C tools include it; implemented in C++. */
#ifndef PI_PLATFORM_CONSOLE_H
#define PI_PLATFORM_CONSOLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on a monotonic clock (arbitrary origin). */
double platform_seconds(void);

/* 1 when f is a terminal (a console on Windows), else 0. */
int platform_is_terminal(FILE* f);

/* fopen with a UTF-8 file name. */
FILE* platform_fopen(const char* path, const char* mode);

/* The size in bytes of the file at `path` (UTF-8); -1 when it cannot be read. */
int64_t platform_file_size(const char* path);

/* getline(): one line, '\n' kept, into *line (grown with realloc as needed). The number of bytes
 * read, or -1 at the end of input or on an error (errno tells which, as ferror(f) does). */
long platform_read_line(char** line, size_t* capacity, FILE* f);

/* Calls handler on Ctrl-C until platform_interrupt_restore(). A blocking read of the console
 * ends with an error (EINTR) rather than restarting, so Ctrl-C at a prompt ends the read. The
 * handler may touch only what a C99 signal handler may. */
void platform_interrupt_catch(void (*handler)(int));
void platform_interrupt_restore(void);

#ifdef __cplusplus
}
#endif

#endif
