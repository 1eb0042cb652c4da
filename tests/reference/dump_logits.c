/* dump_logits: the engine's logits of every position of a token list, for the NumPy oracle.
 *
 *   dump_logits -m MODEL --tokens 1,2,3 -o OUT [--batch-one-by-one] [--dense] [-t N]
 *
 * Writes raw little-endian float32 logits [n_tokens][n_vocab]. Uses only powerinfer.h. The KV
 * cache is F32 so that the comparison measures the engine, not F16 cache rounding. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "powerinfer.h"

#define MAX_TOKENS 64

typedef struct options {
    const char* model;
    const char* out;
    pi_token tokens[MAX_TOKENS];
    int n_tokens;
    int one_by_one;
    int dense;
    int n_threads;
} options;

static int usage_error(const char* why) {
    fprintf(stderr,
            "dump_logits: %s\n"
            "usage: dump_logits -m MODEL --tokens 1,2,3 -o OUT [--batch-one-by-one] [--dense] "
            "[-t N]\n",
            why);
    return 2;
}

static int parse_tokens(const char* s, options* o) {
    o->n_tokens = 0;
    while (*s) {
        char* end = NULL;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno != 0 || v < 0 || v > 2147483647L) return -1;
        if (o->n_tokens == MAX_TOKENS) return -1;
        o->tokens[o->n_tokens++] = (pi_token)v;
        s = end;
        if (*s == ',')
            ++s;
        else if (*s != '\0')
            return -1;
    }
    return o->n_tokens > 0 ? 0 : -1;
}

static int parse_args(int argc, char** argv, options* o) {
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (!strcmp(a, "--batch-one-by-one")) {
            o->one_by_one = 1;
        } else if (!strcmp(a, "--dense")) {
            o->dense = 1;
        } else if (i + 1 < argc && !strcmp(a, "-m")) {
            o->model = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "-o")) {
            o->out = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "-t")) {
            o->n_threads = atoi(argv[++i]);
            if (o->n_threads < 1) return usage_error("-t expects a positive integer");
        } else if (i + 1 < argc && !strcmp(a, "--tokens")) {
            if (parse_tokens(argv[++i], o) != 0)
                return usage_error("--tokens expects 1 to 64 comma-separated token ids");
        } else {
            return usage_error("unknown flag or missing value");
        }
    }
    if (!o->model || !o->out || o->n_tokens == 0)
        return usage_error("-m, --tokens and -o are required");
    return 0;
}

static int fail(const char* what, pi_status st) {
    fprintf(stderr, "dump_logits: %s: %s: %s\n", what, pi_status_str(st), pi_last_error());
    return 1;
}

/* Decodes tokens [first, first + n) with logits for each and appends them to out. */
static int decode_and_write(pi_context* ctx, const options* o, int first, int n, int n_vocab,
                            FILE* out) {
    int8_t want[MAX_TOKENS];
    for (int i = 0; i < n; ++i)
        want[i] = 1;
    pi_batch batch = {n, o->tokens + first, NULL, want};
    pi_status st = pi_decode(ctx, &batch);
    if (st != PI_OK) return fail("pi_decode", st);
    for (int i = 0; i < n; ++i) {
        const float* logits = pi_get_logits(ctx, i);
        if (!logits) {
            fprintf(stderr, "dump_logits: no logits for token %d: %s\n", first + i,
                    pi_last_error());
            return 1;
        }
        if (fwrite(logits, sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab) {
            fprintf(stderr, "dump_logits: %s: write failed\n", o->out);
            return 1;
        }
    }
    return 0;
}

static int run(const options* o, pi_model* model, FILE* out) {
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = MAX_TOKENS;
    cp.n_batch = MAX_TOKENS;
    cp.n_threads = o->n_threads;
    cp.kv_f16 = 0;
    pi_context* ctx = NULL;
    pi_status st = pi_context_create(model, &cp, &ctx);
    if (st != PI_OK) return fail("pi_context_create", st);
    const int n_vocab = pi_n_vocab(model);
    int rc = 0;
    if (o->one_by_one) {
        for (int i = 0; i < o->n_tokens && rc == 0; ++i)
            rc = decode_and_write(ctx, o, i, 1, n_vocab, out);
    } else {
        rc = decode_and_write(ctx, o, 0, o->n_tokens, n_vocab, out);
    }
    pi_context_free(ctx);
    return rc;
}

int main(int argc, char** argv) {
    options o;
    memset(&o, 0, sizeof o);
    o.n_threads = 1;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) return rc;

    pi_model_params mp = pi_model_default_params();
    mp.dense = o.dense;
    pi_model* model = NULL;
    pi_status st = pi_model_load(o.model, &mp, &model);
    if (st != PI_OK) return fail("pi_model_load", st);
    FILE* out = fopen(o.out, "wb");
    if (!out) {
        fprintf(stderr, "dump_logits: %s: cannot create: %s\n", o.out, strerror(errno));
        pi_model_free(model);
        return 1;
    }
    rc = run(&o, model, out);
    if (fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "dump_logits: %s: write failed\n", o.out);
        rc = 1;
    }
    pi_model_free(model);
    return rc;
}
