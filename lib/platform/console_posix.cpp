#include "platform/console.h"

#include <csignal>
#include <cstdio>
#include <ctime>

#include <sys/stat.h>
#include <unistd.h>

namespace {

struct sigaction g_previous_interrupt;

} // namespace

extern "C" {

double platform_seconds(void) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

int platform_is_terminal(FILE* f) {
    return f != nullptr && ::isatty(::fileno(f)) ? 1 : 0;
}

FILE* platform_fopen(const char* path, const char* mode) {
    return std::fopen(path, mode);
}

int64_t platform_file_size(const char* path) {
    struct stat st {};
    return ::stat(path, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

long platform_read_line(char** line, size_t* capacity, FILE* f) {
    return static_cast<long>(::getline(line, capacity, f));
}

void platform_interrupt_catch(void (*handler)(int)) {
    struct sigaction action {};
    action.sa_handler = handler; // no SA_RESTART: Ctrl-C at the prompt ends the read
    ::sigaction(SIGINT, &action, &g_previous_interrupt);
}

void platform_interrupt_restore(void) {
    ::sigaction(SIGINT, &g_previous_interrupt, nullptr);
}

} // extern "C"
