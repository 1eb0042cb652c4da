/* A tool's command line, read one argument at a time:
 *
 *     tool_args a = tool_args_start(argc, argv, usage);
 *     while (tool_args_next(&a)) {
 *         if (tool_args_is(&a, NULL, "--json")) o->json = 1;
 *         else if (tool_args_is(&a, "-m", "--model")) o->model = tool_args_text(&a);
 *         else if (tool_args_is(&a, "-t", "--threads")) tool_args_int(&a, 1, 1024, &o->threads);
 *         else tool_args_unknown(&a);
 *     }
 *     if (!o->model) tool_args_fail(&a, "-m: a model path is required");
 *     return tool_args_finish(&a);
 *
 * -h and --help print the usage text on stdout and exit with status 0. The first usage error
 * ends the loop; later ones are not recorded, so the tool reports exactly one line,
 * "NAME: OPTION: why", and exits with status 2. */
#ifndef PI_TOOL_ARGS_H
#define PI_TOOL_ARGS_H

#include <stdint.h>

#include "tool_printf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tool_args {
    int argc;
    char** argv;
    const char* usage;
    int index;       /* of the current argument in argv */
    const char* arg; /* the current argument, or the option whose value is being read */
    int failed;      /* message holds the usage error */
    char message[512];
} tool_args;

tool_args tool_args_start(int argc, char** argv, const char* usage);

/* Moves to the next argument; 0 at the end or after a usage error. */
int tool_args_next(tool_args* a);

/* Whether the current argument is short_name (may be NULL) or long_name. */
int tool_args_is(const tool_args* a, const char* short_name, const char* long_name);

/* Whether the current argument looks like an option ("-x", "--x"; "-" alone is a value). */
int tool_args_is_option(const tool_args* a);

/* The value of the current option: the next argument, whatever it looks like. NULL and the
 * usage error "OPTION: needs a value" when there is none. */
const char* tool_args_text(tool_args* a);

/* The value of the current option as a number in [lo, hi]: 1 and *out set, or 0 and the usage
 * error "OPTION: expects an integer in [lo, hi], got 'TEXT'" (or "expects a number"). Integers
 * are decimal with an optional sign; numbers are strtod's, finite; neither may start with a
 * space. */
int tool_args_int(tool_args* a, int lo, int hi, int* out);
int tool_args_int64(tool_args* a, int64_t lo, int64_t hi, int64_t* out);
int tool_args_uint64(tool_args* a, uint64_t lo, uint64_t hi, uint64_t* out);
/* With lo = -HUGE_VAL and hi = HUGE_VAL the error reads "expects a finite number". */
int tool_args_double(tool_args* a, double lo, double hi, double* out);
int tool_args_float(tool_args* a, double lo, double hi, float* out);

/* The usage error "ARG: unknown option (see --help)" for the current argument. */
void tool_args_unknown(tool_args* a);

/* Records a usage error of the tool's own (printf-style), unless one is recorded already. */
TOOL_PRINTF(2, 3)
void tool_args_fail(tool_args* a, const char* format, ...);

/* 0 when the command line was fine; else writes "NAME: MESSAGE" on stderr and returns 2. */
int tool_args_finish(const tool_args* a);

#ifdef __cplusplus
}
#endif

#endif
