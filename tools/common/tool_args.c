#include "tool_args.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

tool_args tool_args_start(int argc, char** argv, const char* usage) {
    tool_args a;
    memset(&a, 0, sizeof a);
    a.argc = argc;
    a.argv = argv;
    a.usage = usage;
    return a;
}

int tool_args_next(tool_args* a) {
    if (a->failed || a->index + 1 >= a->argc) return 0;
    a->arg = a->argv[++a->index];
    if (tool_args_is(a, "-h", "--help")) {
        fputs(a->usage, stdout);
        exit(0);
    }
    return 1;
}

int tool_args_is(const tool_args* a, const char* short_name, const char* long_name) {
    return (short_name && strcmp(a->arg, short_name) == 0) || strcmp(a->arg, long_name) == 0;
}

int tool_args_is_option(const tool_args* a) {
    return a->arg[0] == '-' && a->arg[1] != '\0';
}

void tool_args_fail(tool_args* a, const char* format, ...) {
    if (a->failed) return;
    va_list args;
    va_start(args, format);
    vsnprintf(a->message, sizeof a->message, format, args);
    va_end(args);
    a->failed = 1;
}

void tool_args_unknown(tool_args* a) {
    tool_args_fail(a, "%s: unknown option (see --help)", a->arg);
}

int tool_args_finish(const tool_args* a) {
    return a->failed ? tool_fail(2, "%s", a->message) : 0;
}

const char* tool_args_text(tool_args* a) {
    if (a->failed) return NULL;
    if (a->index + 1 >= a->argc) {
        tool_args_fail(a, "%s: needs a value", a->arg);
        return NULL;
    }
    return a->argv[++a->index];
}

/* strtoll and strtod skip leading white space; a value on the command line never has any. */
static int starts_like_a_number(const char* s) {
    return isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+' || s[0] == '.';
}

static int read_int64(tool_args* a, int64_t lo, int64_t hi, int64_t* out) {
    const char* text = tool_args_text(a);
    if (!text) return 0;
    char* end = NULL;
    errno = 0;
    const long long v = starts_like_a_number(text) ? strtoll(text, &end, 10) : 0;
    if (!end || *end != '\0' || errno != 0 || v < lo || v > hi) {
        tool_args_fail(a, "%s: expects an integer in [%lld, %lld], got '%s'", a->arg, (long long)lo,
                       (long long)hi, text);
        return 0;
    }
    *out = v;
    return 1;
}

int tool_args_int(tool_args* a, int lo, int hi, int* out) {
    int64_t v = 0;
    if (!read_int64(a, lo, hi, &v)) return 0;
    *out = (int)v;
    return 1;
}

int tool_args_int64(tool_args* a, int64_t lo, int64_t hi, int64_t* out) {
    return read_int64(a, lo, hi, out);
}

int tool_args_uint64(tool_args* a, uint64_t lo, uint64_t hi, uint64_t* out) {
    const char* text = tool_args_text(a);
    if (!text) return 0;
    char* end = NULL;
    errno = 0;
    /* strtoull would wrap "-1" around to the largest value: no sign here. */
    const unsigned long long v = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
    if (!end || *end != '\0' || errno != 0 || v < lo || v > hi) {
        tool_args_fail(a, "%s: expects an integer in [%llu, %llu], got '%s'", a->arg,
                       (unsigned long long)lo, (unsigned long long)hi, text);
        return 0;
    }
    *out = v;
    return 1;
}

/* as_float: the value must also fit a float (a larger one would become infinite). */
static int read_number(tool_args* a, double lo, double hi, int as_float, double* out) {
    const char* text = tool_args_text(a);
    if (!text) return 0;
    char* end = NULL;
    errno = 0;
    const double v = starts_like_a_number(text) ? strtod(text, &end) : 0.0;
    const int finite = isfinite(v) && (!as_float || fabs(v) <= FLT_MAX);
    if (!end || *end != '\0' || errno != 0 || !finite || v < lo || v > hi) {
        if (isinf(lo) && isinf(hi))
            tool_args_fail(a, "%s: expects a finite number, got '%s'", a->arg, text);
        else
            tool_args_fail(a, "%s: expects a number in [%g, %g], got '%s'", a->arg, lo, hi, text);
        return 0;
    }
    *out = v;
    return 1;
}

int tool_args_double(tool_args* a, double lo, double hi, double* out) {
    return read_number(a, lo, hi, 0, out);
}

int tool_args_float(tool_args* a, double lo, double hi, float* out) {
    double v = 0.0;
    if (!read_number(a, lo, hi, 1, &v)) return 0;
    *out = (float)v;
    return 1;
}
