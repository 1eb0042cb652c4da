/* powerinfer: generate text from a PowerInfer GGUF model with llama.cpp-style flags. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "powerinfer.h"

typedef struct options {
    const char* model;
    const char* prompt;
    const char* prompt_file;
    int n_predict, n_threads, n_ctx, n_batch, verbose, dense, reset_gpu_index, disable_gpu_index;
    const char* offload_device;
    const char* activation_stats;
    long long seed;
    float temp, top_p;
    int top_k;
    double vram_budget_gib;
    int vram_budget_given;
} options;

static void usage(FILE* out) {
    fprintf(
        out,
        "usage: powerinfer -m MODEL [-p PROMPT | -f FILE] [options]\n"
        "  -m, --model PATH       model file (PowerInfer GGUF, sparse PWRI or dense GGUF)\n"
        "  -p, --prompt TEXT      prompt (default: empty prompt after BOS)\n"
        "  -f, --file PATH        read the prompt from a file\n"
        "  -n, --n-predict N      tokens to generate (default 128)\n"
        "  -t, --threads N        CPU threads (default: library default)\n"
        "  -c, --ctx-size N       context size in tokens (default 512, 0 = model's)\n"
        "  -b, --batch-size N     prompt batch size (default 512)\n"
        "  -s, --seed N           RNG seed (default -1: random)\n"
        "      --temp F           temperature (default 0.8; 0 = greedy)\n"
        "      --top-k N          top-k (default 40; 0 = off)\n"
        "      --top-p F          top-p (default 0.95; 1 = off)\n"
        "      --vram-budget GiB  offload device memory: dense blocks, KV cache, hot FFN neurons\n"
        "      --offload-device D auto (default: CUDA/HIP when usable), cuda, hip, cpu, none\n"
        "      --reset-gpu-index  re-plan instead of using MODEL.generated.gpuidx\n"
        "      --disable-gpu-index keep every FFN neuron on the CPU\n"
        "      --activation-stats P activation statistics for the planner\n"
        "      --dense            compute every FFN neuron (ignore the predictor)\n"
        "      --verbose          log library messages at info level\n"
        "  -h, --help             this text\n");
}

static int fail_arg(const char* flag, const char* why) {
    fprintf(stderr, "powerinfer: %s: %s\n", flag, why);
    return 2;
}

static int parse_int(const char* flag, const char* s, int* out) {
    char* end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *s == '\0' || *end != '\0' || errno != 0 || v < -2147483647L || v > 2147483647L)
        return fail_arg(flag, "expects an integer");
    *out = (int)v;
    return 0;
}

static int parse_float(const char* flag, const char* s, double* out) {
    char* end = NULL;
    double v = s ? strtod(s, &end) : 0.0;
    if (!s || *s == '\0' || *end != '\0') return fail_arg(flag, "expects a number");
    *out = v;
    return 0;
}

static int parse_args(int argc, char** argv, options* o) {
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        double d = 0.0;
        int rc = 0, takes_value = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
            takes_value = 0;
        } else if (!strcmp(a, "--dense")) {
            o->dense = 1;
            takes_value = 0;
        } else if (!strcmp(a, "--reset-gpu-index")) {
            o->reset_gpu_index = 1;
            takes_value = 0;
        } else if (!strcmp(a, "--disable-gpu-index")) {
            o->disable_gpu_index = 1;
            takes_value = 0;
        } else if (!v)
            return fail_arg(a, "needs a value (or is unknown; see --help)");
        else if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
            o->prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file"))
            o->prompt_file = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))
            rc = parse_int(a, v, &o->n_predict);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            rc = parse_int(a, v, &o->n_threads);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            rc = parse_int(a, v, &o->n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            rc = parse_int(a, v, &o->n_batch);
        else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
            rc = parse_float(a, v, &d);
            o->seed = (long long)d;
        } else if (!strcmp(a, "--temp")) {
            rc = parse_float(a, v, &d);
            o->temp = (float)d;
        } else if (!strcmp(a, "--top-k"))
            rc = parse_int(a, v, &o->top_k);
        else if (!strcmp(a, "--top-p")) {
            rc = parse_float(a, v, &d);
            o->top_p = (float)d;
        } else if (!strcmp(a, "--vram-budget")) {
            rc = parse_float(a, v, &o->vram_budget_gib);
            o->vram_budget_given = 1;
        } else if (!strcmp(a, "--offload-device"))
            o->offload_device = v;
        else if (!strcmp(a, "--activation-stats"))
            o->activation_stats = v;
        else
            return fail_arg(a, "unknown option (see --help)");
        if (rc) return rc;
        i += takes_value;
    }
    if (!o->model) return fail_arg("-m", "a model path is required");
    if (o->prompt && o->prompt_file) return fail_arg("-f", "give either -p or -f, not both");
    return 0;
}

static char* read_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char* buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            char* bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static int print_piece(const char* text, size_t len, void* user_data) {
    (void)user_data;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 1;
}

static void log_to_stderr(pi_log_level level, const char* message, void* user_data) {
    (void)user_data;
    static const char* names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "powerinfer: %s: %s\n", names[level & 3], message);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int die(const char* what, pi_status st) {
    fprintf(stderr, "powerinfer: %s: %s (%s)\n", what, pi_last_error(), pi_status_str(st));
    return 1;
}

int main(int argc, char** argv) {
    options o = {0};
    o.n_predict = 128;
    o.n_ctx = 512;
    o.n_batch = 512;
    o.seed = -1;
    o.temp = 0.8f;
    o.top_k = 40;
    o.top_p = 0.95f;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (o.verbose) pi_log_set(log_to_stderr, NULL);

    char* prompt_buf = NULL;
    if (o.prompt_file && !(prompt_buf = read_file(o.prompt_file))) {
        fprintf(stderr, "powerinfer: -f: cannot read '%s': %s\n", o.prompt_file, strerror(errno));
        return 1;
    }
    const char* prompt = prompt_buf ? prompt_buf : (o.prompt ? o.prompt : "");
    pi_model_params mp = pi_model_default_params();
    mp.dense = o.dense;
    if (o.vram_budget_given) mp.vram_budget = o.vram_budget_gib * 1073741824.0;
    mp.reset_gpu_index = o.reset_gpu_index;
    mp.disable_gpu_index = o.disable_gpu_index;
    mp.offload_device = o.offload_device;
    mp.activation_stats = o.activation_stats;
    mp.kv_n_ctx = o.n_ctx; /* as PowerInfer loading a model with its context: KV cache on the device
                              when it fits */
    pi_model* model = NULL;
    const double t0 = now_seconds();
    pi_status st = pi_model_load(o.model, &mp, &model);
    if (st != PI_OK) {
        free(prompt_buf);
        return die("loading the model", st);
    }
    const double load_s = now_seconds() - t0;
    pi_model_info info;
    info.struct_size = sizeof(info);
    if (pi_model_info_get(model, &info) == PI_OK && (o.vram_budget_given || o.offload_device)) {
        if (info.offload_device[0])
            fprintf(stderr,
                    "powerinfer: %.1f MiB of weights (dense blocks and hot FFN neurons) on %s%s\n",
                    info.offload_bytes / 1048576.0, info.offload_device,
                    info.kv_n_ctx_on_device > 0 ? ", KV cache too" : "");
        else
            fprintf(
                stderr,
                "powerinfer: no GPU backend is active: running on the CPU (see pi_system_info)\n");
    }

    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_batch = o.n_batch;
    if (o.n_threads) cp.n_threads = o.n_threads;
    pi_context* ctx = NULL;
    st = pi_context_create(model, &cp, &ctx);
    if (st != PI_OK) {
        pi_model_free(model);
        free(prompt_buf);
        return die("creating the context", st);
    }

    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = o.n_predict < 0 ? 0x7fffffff : o.n_predict;
    gp.sampling.temperature = o.temp;
    gp.sampling.top_k = o.top_k;
    gp.sampling.top_p = o.top_p;
    gp.sampling.seed = o.seed < 0 ? PI_SEED_RANDOM : (uint32_t)o.seed;
    gp.callback = print_piece;
    pi_generate_result res = {0};
    res.struct_size = sizeof(res);
    fputs(prompt, stdout);
    st = pi_generate(ctx, prompt, &gp, &res);
    fputc('\n', stdout);
    if (st < 0) {
        pi_context_free(ctx);
        pi_model_free(model);
        free(prompt_buf);
        return die("generating", st);
    }
    pi_context_stats stats = {0};
    stats.struct_size = sizeof(stats);
    pi_context_stats_get(ctx, &stats);
    fprintf(stderr, "\npowerinfer: load time      = %9.2f ms\n", load_s * 1e3);
    fprintf(stderr, "powerinfer: prompt eval    = %9.2f ms / %d tokens (%.2f tokens/s)\n",
            res.prompt_seconds * 1e3, res.n_prompt_tokens,
            res.prompt_seconds > 0 ? res.n_prompt_tokens / res.prompt_seconds : 0.0);
    fprintf(stderr, "powerinfer: decode         = %9.2f ms / %d tokens (%.2f tokens/s)\n",
            stats.decode_seconds * 1e3, (int)stats.n_decode_tokens,
            stats.decode_seconds > 0 ? stats.n_decode_tokens / stats.decode_seconds : 0.0);
    fprintf(stderr, "powerinfer: FFN neurons computed = %.1f%%\n",
            stats.ffn_active_fraction * 100.0);
    pi_context_free(ctx);
    pi_model_free(model);
    free(prompt_buf);
    return 0;
}
