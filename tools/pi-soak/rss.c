/* The resident set size: /proc/self/statm on Linux; elsewhere it is reported as unmeasured
 * rather than guessed (getrusage gives only the peak, which cannot show memory coming back). */
#define _POSIX_C_SOURCE 200809L /* sysconf */

#include <stdio.h>
#include <unistd.h>

#include "soak.h"

#if defined(__linux__)

int64_t soak_rss_kib(void) {
    FILE* f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long long size = 0, resident = 0;
    const int read = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    const long page = sysconf(_SC_PAGESIZE);
    if (read != 2 || page <= 0 || resident < 0) return -1;
    return (int64_t)(resident * (long long)(page / 1024));
}

const char* soak_rss_source(void) {
    return soak_rss_kib() >= 0 ? "/proc/self/statm" : "/proc/self/statm is unreadable";
}

#else

int64_t soak_rss_kib(void) {
    return -1;
}

const char* soak_rss_source(void) {
    return "this platform has no /proc/self/statm: the RSS is not measured";
}

#endif
