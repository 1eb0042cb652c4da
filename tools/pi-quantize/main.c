/* pi-quantize: convert a F32/F16 PowerInfer GGUF model to a ggml quantization format
 * (docs/quantization.md). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "platform/console.h"
#include "powerinfer.h"
#include "tool.h"
#include "tool_args.h"

const char tool_name[] = "pi-quantize";

static volatile sig_atomic_t interrupted = 0;

static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

static const char usage[] =
    "usage: pi-quantize IN OUT TYPE [--pure] [--leave-output-tensor] [--threads N]\n"
    "                   [--keep-predictor]\n"
    "Converts the 2-D weights of a F32/F16 model (sparse PWRI or dense GGUF) to TYPE;\n"
    "norms stay F32, metadata and tensor order are kept.\n"
    "  TYPE                Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16 F32 Q2_K Q3_K_S Q3_K_M Q3_K_L\n"
    "                      Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K (Q3_K, Q4_K, Q5_K: the _M ones)\n"
    "      --pure          every 2-D weight gets TYPE; by default PowerInfer's mix:\n"
    "                      output.weight Q6_K (Q8_0 for Falcon), the predictor (fc1/fc2)\n"
    "                      Q4_0 for a Q4_0 TYPE and Q5_0 otherwise, and the K-quant rules\n"
    "      --leave-output-tensor  copy output.weight unchanged\n"
    "  -t, --threads N     worker threads (default: all hardware threads)\n"
    "      --keep-predictor  leave the predictor (fc1/fc2) at its input type\n"
    "  -h, --help          this text\n"
    "Exit status: 0 written, 1 failed, 2 bad arguments (also OUT naming the IN file),\n"
    "130 interrupted.\n";

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
            fprintf(stderr, "\r%s: [%.*s%*s] %3d%%", tool_name, filled,
                    "########################################", width - filled, "", pct);
            fflush(stderr);
            b->last = pct;
        }
    }
    return !interrupted;
}

static double mib(const char* path) {
    const int64_t size = platform_file_size(path);
    return size >= 0 ? (double)size / (1024.0 * 1024.0) : 0.0;
}

/* The positional arguments, IN, OUT and TYPE, go to files[0..2]. */
static int parse_args(int argc, char** argv, const char* files[3], pi_quantize_params* p) {
    int n_files = 0;
    tool_args a = tool_args_start(argc, argv, usage);
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, NULL, "--keep-predictor"))
            p->keep_predictor = 1;
        else if (tool_args_is(&a, NULL, "--pure"))
            p->pure = 1;
        else if (tool_args_is(&a, NULL, "--leave-output-tensor"))
            p->leave_output_tensor = 1;
        else if (tool_args_is(&a, "-t", "--threads"))
            tool_args_int(&a, 1, 1024, &p->n_threads);
        else if (tool_args_is_option(&a))
            tool_args_unknown(&a);
        else if (n_files < 3)
            files[n_files++] = a.arg;
        else
            tool_args_fail(&a, "%s: unexpected extra argument (usage: pi-quantize IN OUT TYPE)",
                           a.arg);
    }
    const int rc = tool_args_finish(&a);
    if (rc == 0 && n_files != 3) {
        fputs(usage, stderr);
        return 2;
    }
    return rc;
}

int main(int argc, char** argv) {
    const char* files[3] = {NULL, NULL, NULL};
    pi_quantize_params p = pi_quantize_default_params();
    const int rc = parse_args(argc, argv, files, &p);
    if (rc != 0) return rc;
    const char *in = files[0], *out = files[1];
    p.type = files[2];

    bar b = {platform_is_terminal(stderr), -1};
    p.progress = on_progress;
    p.progress_user_data = &b;
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);

    const pi_status st = pi_model_quantize(in, out, &p);
    if (b.tty && b.last >= 0) fputc('\n', stderr);
    if (st == PI_STATUS_CANCELLED) return tool_fail(130, "interrupted; %s was not written", out);
    if (st != PI_OK) {
        tool_fail_status(NULL, st);
        return st == PI_ERR_INVALID_ARGUMENT ? 2 : 1; /* a TYPE it does not know, OUT naming IN */
    }
    printf("pi-quantize: wrote %s (%s%s, %.2f MiB -> %.2f MiB)\n", out, p.type,
           p.pure ? ", pure" : "", mib(in), mib(out));
    return 0;
}
