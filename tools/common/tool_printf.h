/* The format attribute of the tools' printf-style functions. */
#ifndef PI_TOOL_PRINTF_H
#define PI_TOOL_PRINTF_H

/* mingw-w64 builds use its C99 printf (__USE_MINGW_ANSI_STDIO, cmake/CompilerFlags.cmake), which
 * knows %zu and %lld; GCC checks formats against msvcrt's unless told gnu_printf. */
#if defined(__MINGW32__)
#define TOOL_PRINTF(format_index, first_arg)                                                       \
    __attribute__((format(gnu_printf, format_index, first_arg)))
#elif defined(__GNUC__)
#define TOOL_PRINTF(format_index, first_arg)                                                       \
    __attribute__((format(printf, format_index, first_arg)))
#else
#define TOOL_PRINTF(format_index, first_arg)
#endif

#endif
