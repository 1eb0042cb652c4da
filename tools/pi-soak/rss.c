/* The resident set size: /proc/self/statm on Linux; elsewhere it is reported as unmeasured
 * rather than guessed (getrusage gives only the peak, which cannot show memory coming back). */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#define _DEFAULT_SOURCE         /* mallinfo2 */

#include <stdio.h>
#include <unistd.h>

#include "soak.h"

#if defined(__linux__)

#include <malloc.h>

/* Resident and shared pages of /proc/self/statm; 0 when it cannot be read. */
static int read_statm(long long* resident, long long* shared) {
    FILE* f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long long size = 0;
    const int read = fscanf(f, "%lld %lld %lld", &size, resident, shared);
    fclose(f);
    return read == 3 && *resident >= 0 && *shared >= 0;
}

static long long page_kib(void) {
    const long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? page / 1024 : 0;
}

int64_t soak_rss_kib(void) {
    long long resident = 0, shared = 0;
    if (!read_statm(&resident, &shared) || page_kib() == 0) return -1;
    return (int64_t)(resident * page_kib());
}

void soak_memory_detail(char* out, size_t cap) {
    long long resident = 0, shared = 0;
    int n = 0;
    if (read_statm(&resident, &shared) && page_kib() > 0)
        n = snprintf(out, cap, " shared %lld anon %lld", shared * page_kib(),
                     (resident - shared) * page_kib());
    if (n < 0 || (size_t)n >= cap) n = 0;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    const struct mallinfo2 heap = mallinfo2();
    snprintf(out + n, cap - (size_t)n, " inuse %zu arena %zu mmap %zu", heap.uordblks / 1024,
             heap.arena / 1024, heap.hblkhd / 1024);
#else
    out[n] = '\0';
#endif
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

void soak_memory_detail(char* out, size_t cap) {
    if (cap > 0) out[0] = '\0';
}

#endif
