/* pi-perplexity: perplexity of a model on a text, by llama.cpp's method (docs/quantization.md):
 * non-overlapping windows of n_ctx tokens, each starting from an empty cache with BOS in its
 * first slot, scoring only the second half of every window. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "powerinfer.h"

typedef struct options {
    const char *model, *text;
    int n_ctx, n_batch, n_chunks, n_threads, json, dense, verbose;
} options;

static void usage(FILE* out) {
    fprintf(out,
            "usage: pi-perplexity -m MODEL -f TEXT [-c N_CTX] [-b N] [--chunks K] [-t N] [--json]\n"
            "  -m, --model PATH     model file\n"
            "  -f, --file PATH      UTF-8 text; needs at least 2 * N_CTX tokens\n"
            "  -c, --ctx-size N     window length in tokens (default 512; 0 = the model's; >= 4)\n"
            "  -b, --batch-size N   tokens per decode call (default 512; at most N_CTX)\n"
            "      --chunks K       evaluate at most K windows (default: all)\n"
            "  -t, --threads N      CPU threads (default: library default)\n"
            "      --dense          compute every FFN neuron (ignore the predictor)\n"
            "      --json           print a JSON summary on stdout (progress goes to stderr)\n"
            "      --verbose        log library messages at info level\n"
            "  -h, --help           this text\n"
            "Prints [i]ppl, after every window and 'Final estimate: PPL = x +/- y'.\n"
            "Exit status: 0 done, 1 failed (model, text too short), 2 bad arguments.\n");
}

static int fail_arg(const char* flag, const char* why) {
    fprintf(stderr, "pi-perplexity: %s: %s\n", flag, why);
    return 2;
}

static int parse_int(const char* flag, const char* s, int min, int* out) {
    char* end = NULL;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > 1000000000L)
        return fail_arg(flag,
                        min == 0 ? "expects a non-negative integer" : "expects a positive integer");
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char** argv, options* o) {
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--dense")) {
            o->dense = 1;
            continue;
        }
        if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
            continue;
        }
        if (i + 1 >= argc) return fail_arg(a, "unknown flag or missing value (see --help)");
        const char* v = argv[++i];
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file"))
            o->text = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            rc = parse_int(a, v, 0, &o->n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            rc = parse_int(a, v, 1, &o->n_batch);
        else if (!strcmp(a, "--chunks"))
            rc = parse_int(a, v, 1, &o->n_chunks);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            rc = parse_int(a, v, 1, &o->n_threads);
        else
            return fail_arg(a, "unknown flag (see --help)");
        if (rc) return rc;
    }
    if (!o->model) return fail_arg("-m", "a model path is required");
    if (!o->text) return fail_arg("-f", "a text file is required");
    if (o->n_ctx != 0 && o->n_ctx < 4)
        return fail_arg("-c", "the window must be at least 4 tokens");
    return 0;
}

/* The whole file; *len receives its size (the text may contain NUL bytes). */
static char* read_file(const char* path, size_t* len) {
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n;
    char* buf = malloc(cap);
    *len = 0;
    while (buf && (n = fread(buf + *len, 1, cap - *len, f)) > 0) {
        *len += n;
        if (*len == cap) {
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
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void log_to_stderr(pi_log_level level, const char* message, void* user_data) {
    (void)user_data;
    static const char* names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "pi-perplexity: %s: %s\n", names[level & 3], message);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* -log p(target) under softmax(logits), in double. */
static double nll_of(const float* logits, int n_vocab, pi_token target) {
    float max = logits[0];
    for (int i = 1; i < n_vocab; ++i)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i)
        sum += exp((double)logits[i] - max);
    return -((double)logits[target] - max - log(sum));
}

static void json_string(FILE* out, const char* s) {
    fputc('"', out);
    for (; *s; ++s) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* JSON has no inf or NaN: a model that overflows reports null. */
static void json_number(FILE* out, const char* key, double v) {
    if (isfinite(v))
        fprintf(out, ", \"%s\": %.9g", key, v);
    else
        fprintf(out, ", \"%s\": null", key);
}

typedef struct run {
    pi_model* model;
    pi_context* ctx;
    pi_token* tokens;
    size_t n_tokens;
    pi_token* batch_tokens;
    int32_t* batch_pos;
    int8_t* batch_logits;
    double* chunk_ppl;
} run;

static void run_free(run* r) {
    pi_context_free(r->ctx);
    pi_model_free(r->model);
    free(r->tokens);
    free(r->batch_tokens);
    free(r->batch_pos);
    free(r->batch_logits);
    free(r->chunk_ppl);
}

static int die(run* r, const char* what, pi_status st) {
    fprintf(stderr, "pi-perplexity: %s: %s: %s\n", what, pi_status_str(st), pi_last_error());
    run_free(r);
    return 1;
}

int main(int argc, char** argv) {
    options o = {0};
    o.n_ctx = 512;
    o.n_batch = 512;
    o.n_chunks = -1;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (o.verbose) pi_log_set(log_to_stderr, NULL);
    FILE* human = o.json ? stderr : stdout;

    size_t text_len = 0;
    char* text = read_file(o.text, &text_len);
    if (!text) {
        fprintf(stderr, "pi-perplexity: -f: cannot read '%s': %s\n", o.text, strerror(errno));
        return 1;
    }

    run r = {0};
    pi_model_params mp = pi_model_default_params();
    mp.dense = o.dense;
    pi_status st = pi_model_load(o.model, &mp, &r.model);
    if (st != PI_OK) {
        free(text);
        return die(&r, "loading the model", st);
    }

    const pi_token bos = pi_token_bos(r.model);
    const int add_bos = bos >= 0; /* SPM vocabularies: the only kind this engine reads */
    st = pi_tokenize(r.model, text, text_len, add_bos, NULL, 0, &r.n_tokens);
    if (st != PI_OK && st != PI_ERR_INVALID_ARGUMENT) {
        free(text);
        return die(&r, "tokenizing", st);
    }
    r.tokens = malloc((r.n_tokens ? r.n_tokens : 1) * sizeof(pi_token));
    if (!r.tokens) {
        free(text);
        fprintf(stderr, "pi-perplexity: out of memory\n");
        run_free(&r);
        return 1;
    }
    st = pi_tokenize(r.model, text, text_len, add_bos, r.tokens, r.n_tokens, &r.n_tokens);
    free(text);
    if (st != PI_OK) return die(&r, "tokenizing", st);

    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_batch = o.n_ctx != 0 && o.n_batch > o.n_ctx ? o.n_ctx : o.n_batch;
    if (o.n_threads) cp.n_threads = o.n_threads;
    st = pi_context_create(r.model, &cp, &r.ctx);
    if (st != PI_OK) return die(&r, "creating the context", st);
    const int n_ctx = pi_context_n_ctx(r.ctx);
    const int n_batch = cp.n_batch < n_ctx ? cp.n_batch : n_ctx;
    if (n_ctx < 4) {
        fprintf(stderr, "pi-perplexity: -c: the window must be at least 4 tokens, got %d\n", n_ctx);
        run_free(&r);
        return 2;
    }
    if (r.n_tokens < 2 * (size_t)n_ctx) {
        fprintf(stderr,
                "pi-perplexity: %s has %zu tokens; at least %d (2 * n_ctx) are needed for -c %d\n",
                o.text, r.n_tokens, 2 * n_ctx, n_ctx);
        run_free(&r);
        return 1;
    }
    const int n_chunk_max = (int)(r.n_tokens / (size_t)n_ctx);
    const int n_chunk = o.n_chunks < 0 || o.n_chunks > n_chunk_max ? n_chunk_max : o.n_chunks;
    const int n_vocab = pi_n_vocab(r.model);
    const int first = n_ctx / 2;

    r.batch_tokens = malloc((size_t)n_batch * sizeof(pi_token));
    r.batch_pos = malloc((size_t)n_batch * sizeof(int32_t));
    r.batch_logits = malloc((size_t)n_batch);
    r.chunk_ppl = malloc((size_t)n_chunk * sizeof(double));
    if (!r.batch_tokens || !r.batch_pos || !r.batch_logits || !r.chunk_ppl) {
        fprintf(stderr, "pi-perplexity: out of memory\n");
        run_free(&r);
        return 1;
    }
    memset(r.batch_logits, 1, (size_t)n_batch);
    fprintf(stderr,
            "pi-perplexity: %zu tokens, %d chunks of %d, batch %d, scoring positions %d..%d\n",
            r.n_tokens, n_chunk, n_ctx, n_batch, first, n_ctx - 2);

    double nll = 0.0, nll2 = 0.0;
    long long count = 0;
    const double t0 = now_seconds();
    for (int i = 0; i < n_chunk; ++i) {
        const size_t start = (size_t)i * (size_t)n_ctx;
        st = pi_kv_truncate(r.ctx, 0);
        if (st != PI_OK) return die(&r, "clearing the cache", st);
        for (int j = 0; j * n_batch < n_ctx; ++j) {
            const int batch_first = j * n_batch;
            const int size = n_ctx - batch_first < n_batch ? n_ctx - batch_first : n_batch;
            for (int k = 0; k < size; ++k) {
                r.batch_tokens[k] = r.tokens[start + (size_t)batch_first + (size_t)k];
                r.batch_pos[k] = batch_first + k;
            }
            if (add_bos && j == 0) r.batch_tokens[0] = bos;
            const pi_batch batch = {size, r.batch_tokens, r.batch_pos, r.batch_logits};
            st = pi_decode(r.ctx, &batch);
            if (st != PI_OK) return die(&r, "decoding", st);
            for (int k = 0; k < size; ++k) {
                const int p = batch_first + k;
                if (p < first || p > n_ctx - 2) continue;
                const float* logits = pi_get_logits(r.ctx, k);
                if (!logits) return die(&r, "reading logits", PI_ERR_INTERNAL);
                const double v = nll_of(logits, n_vocab, r.tokens[start + (size_t)p + 1]);
                nll += v;
                nll2 += v * v;
                ++count;
            }
        }
        r.chunk_ppl[i] = exp(nll / (double)count);
        if (i == 0) {
            const double per_chunk = now_seconds() - t0;
            fprintf(stderr, "pi-perplexity: %.2f seconds per chunk, ETA %.1f minutes\n", per_chunk,
                    per_chunk * (n_chunk - 1) / 60.0);
        }
        fprintf(human, "[%d]%.4f,", i + 1, r.chunk_ppl[i]);
        fflush(human);
    }
    fputc('\n', human);
    const double seconds = now_seconds() - t0;

    /* llama.cpp's estimate: PPL = exp(mean NLL) with the standard error of the mean NLL carried
     * through exp to first order. */
    const double mean = nll / (double)count;
    const double ppl = exp(mean);
    const double var = nll2 / (double)count - mean * mean;
    const double stderr_ppl = var > 0.0 && count > 1 ? sqrt(var / (double)(count - 1)) * ppl : 0.0;
    if (var > 0.0)
        fprintf(human, "Final estimate: PPL = %.4f +/- %.5f\n", ppl, stderr_ppl);
    else
        fprintf(human, "Unexpected negative standard deviation of log(prob)\n");

    if (o.json) {
        printf("{\"model\": ");
        json_string(stdout, o.model);
        printf(", \"text\": ");
        json_string(stdout, o.text);
        printf(", \"n_ctx\": %d, \"n_batch\": %d, \"n_tokens\": %zu, \"n_chunks\": %d, "
               "\"n_scored\": %lld",
               n_ctx, n_batch, r.n_tokens, n_chunk, count);
        json_number(stdout, "nll_mean", mean);
        json_number(stdout, "ppl", ppl);
        json_number(stdout, "ppl_stderr", stderr_ppl);
        printf(", \"seconds\": %.3f, \"chunk_ppl\": [", seconds);
        for (int i = 0; i < n_chunk; ++i) {
            if (i) printf(", ");
            if (isfinite(r.chunk_ppl[i]))
                printf("%.9g", r.chunk_ppl[i]);
            else
                printf("null");
        }
        printf("]}\n");
    }
    run_free(&r);
    return 0;
}
