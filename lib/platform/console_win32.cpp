#include "platform/console.h"
#include "win32_text.hpp"

#include <csignal>
#include <cstdlib>
#include <cstring>

#include <io.h>

namespace {

void (*g_previous_interrupt)(int) = SIG_DFL;
void (*volatile g_interrupt_handler)(int) = nullptr;

// The C runtime resets a handler to SIG_DFL before calling it; catching again keeps a second
// Ctrl-C from ending the program, as sigaction does on POSIX.
void forward_interrupt(int signal_number) {
    std::signal(SIGINT, forward_interrupt);
    if (g_interrupt_handler) g_interrupt_handler(signal_number);
}

} // namespace

extern "C" {

double platform_seconds(void) {
    LARGE_INTEGER now{}, frequency{};
    ::QueryPerformanceCounter(&now);
    ::QueryPerformanceFrequency(&frequency);
    return static_cast<double>(now.QuadPart) / static_cast<double>(frequency.QuadPart);
}

int platform_is_terminal(FILE* f) {
    return f != nullptr && ::_isatty(::_fileno(f)) ? 1 : 0;
}

FILE* platform_fopen(const char* path, const char* mode) {
    return ::_wfopen(pi::platform::win32::widen(path).c_str(),
                     pi::platform::win32::widen(mode).c_str());
}

int64_t platform_file_size(const char* path) {
    WIN32_FILE_ATTRIBUTE_DATA data{};
    if (!::GetFileAttributesExW(pi::platform::win32::widen(path).c_str(), GetFileExInfoStandard,
                                &data))
        return -1;
    return (static_cast<int64_t>(data.nFileSizeHigh) << 32) | data.nFileSizeLow;
}

long platform_read_line(char** line, size_t* capacity, FILE* f) {
    size_t used = 0;
    for (int c; (c = std::fgetc(f)) != EOF;) {
        if (used + 2 > *capacity) {
            const size_t bigger = *capacity < 64 ? 128 : *capacity * 2;
            char* grown = static_cast<char*>(std::realloc(*line, bigger));
            if (!grown) {
                errno = ENOMEM;
                return -1;
            }
            *line = grown;
            *capacity = bigger;
        }
        (*line)[used++] = static_cast<char>(c);
        if (c == '\n') break;
    }
    if (used == 0) return -1;
    (*line)[used] = '\0';
    return static_cast<long>(used);
}

// The C runtime runs a console's Ctrl-C handler on a thread of its own, and the blocked read of
// the console returns at once, so a prompt's read ends as on POSIX.
void platform_interrupt_catch(void (*handler)(int)) {
    g_interrupt_handler = handler;
    g_previous_interrupt = std::signal(SIGINT, forward_interrupt);
}

void platform_interrupt_restore(void) {
    std::signal(SIGINT, g_previous_interrupt);
}

} // extern "C"
