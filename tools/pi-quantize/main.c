/* pi-quantize: convert a F32/F16 PowerInfer GGUF model to a ggml quantization format
 * (docs/quantization.md). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powerinfer.h"

static volatile sig_atomic_t interrupted = 0;

static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

static void usage(FILE* out) {
    fprintf(out,
            "usage: pi-quantize IN OUT TYPE [--threads N] [--keep-predictor]\n"
            "Converts the 2-D weights of a F32/F16 model (sparse PWRI or dense GGUF) to TYPE;\n"
            "norms stay F32, metadata and tensor order are kept.\n"
            "  TYPE                Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16 or F32\n"
            "  -t, --threads N     worker threads (default: all hardware threads)\n"
            "      --keep-predictor  leave the predictor (fc1/fc2) at its input type; by default\n"
            "                      it becomes Q4_0 for a Q4_0 target and Q5_0 otherwise\n"
            "  -h, --help          this text\n"
            "Exit status: 0 written, 1 failed, 2 bad arguments (also OUT naming the IN file),\n"
            "130 interrupted.\n");
}

static int fail_arg(const char* what, const char* why) {
    fprintf(stderr, "pi-quantize: %s: %s\n", what, why);
    return 2;
}

typedef struct bar {
    int tty;
    int last;
} bar;

static int on_progress(float progress, void* user_data) {
    bar* b = (bar*)user_data;
    if (b->tty) {
        const int pct = (int)(progress * 100.0f + 0.5f);
        if (pct != b->last) {
            const int width = 40, filled = pct * width / 100;
            fprintf(stderr, "\rpi-quantize: [%.*s%*s] %3d%%", filled,
                    "########################################", width - filled, "", pct);
            fflush(stderr);
            b->last = pct;
        }
    }
    return !interrupted;
}

static double mib(const char* path) {
    struct stat st;
    return stat(path, &st) == 0 ? (double)st.st_size / (1024.0 * 1024.0) : 0.0;
}

int main(int argc, char** argv) {
    const char* positional[3] = {NULL, NULL, NULL};
    int n_positional = 0;
    pi_quantize_params p = pi_quantize_default_params();
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--keep-predictor")) {
            p.keep_predictor = 1;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (i + 1 >= argc) return fail_arg(a, "needs a value");
            char* end = NULL;
            errno = 0;
            const long v = strtol(argv[++i], &end, 10);
            if (*argv[i] == '\0' || *end != '\0' || errno != 0 || v < 1 || v > 1024)
                return fail_arg(a, "expects an integer from 1 to 1024");
            p.n_threads = (int32_t)v;
        } else if (a[0] == '-' && a[1] != '\0') {
            return fail_arg(a, "unknown flag (see --help)");
        } else if (n_positional < 3) {
            positional[n_positional++] = a;
        } else {
            return fail_arg(a, "unexpected extra argument (usage: pi-quantize IN OUT TYPE)");
        }
    }
    if (n_positional != 3) {
        usage(stderr);
        return 2;
    }
    const char *in = positional[0], *out = positional[1];
    p.type = positional[2];

    bar b = {isatty(fileno(stderr)), -1};
    p.progress = on_progress;
    p.progress_user_data = &b;
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);

    const pi_status st = pi_model_quantize(in, out, &p);
    if (b.tty && b.last >= 0) fputc('\n', stderr);
    if (st == PI_STATUS_CANCELLED) {
        fprintf(stderr, "pi-quantize: interrupted; %s was not written\n", out);
        return 130;
    }
    if (st != PI_OK) {
        fprintf(stderr, "pi-quantize: %s: %s\n", pi_status_str(st), pi_last_error());
        return st == PI_ERR_INVALID_ARGUMENT ? 2 : 1;
    }
    printf("pi-quantize: wrote %s (%s, %.2f MiB -> %.2f MiB)\n", out, p.type, mib(in), mib(out));
    return 0;
}
