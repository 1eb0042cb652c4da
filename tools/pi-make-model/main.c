/* pi-make-model: write a synthetic PowerInfer-format model (docs/synthetic-models.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "powerinfer.h"

static void usage(FILE* out) {
    fprintf(out,
            "usage: pi-make-model -o OUT --vocab PATH [options]\n"
            "Writes a synthetic model with random weights, realistic activation sparsity and an\n"
            "exact (or deliberately noisy) activation predictor.\n"
            "  -o, --out PATH           output file (required)\n"
            "      --vocab PATH         vocab-only GGUF whose tokenizer.* keys are copied "
            "(required)\n"
            "      --arch NAME          llama (ReGLU, default) or bamboo (relu(gate)*relu(up))\n"
            "      --n-embd N           embedding length (default 256)\n"
            "      --n-layer N          layers (default 2)\n"
            "      --n-head N           attention heads (default 8)\n"
            "      --n-head-kv N        key/value heads, divides n-head (default: n-head)\n"
            "      --n-ff N             FFN neurons per layer (default 688)\n"
            "      --ctx N              training context length recorded in the file "
            "(default 2048)\n"
            "      --predictor-rank N   fc1 rows, even and >= 4 (default 0: 2*(max(8, "
            "n_embd/16)+1))\n"
            "      --f16 | --f32        type of the 2-D weights (default F32; norms stay F32)\n"
            "      --sparse | --dense   PowerInfer sparse file with predictor (default) or dense "
            "GGUF\n"
            "      --dense-swiglu       dense file without powerinfer.ffn_activation = \"relu\"\n"
            "      --sparsity F         target fraction of inactive FFN neurons, in [0, 1) "
            "(default 0.9)\n"
            "      --power-law F        skew of per-neuron firing frequency, 0 = uniform "
            "(default 1)\n"
            "      --predictor-noise F  relative noise on fc2, 0 = exact predictor (default 0)\n"
            "      --seed N             random seed (default 1)\n"
            "  -h, --help               this text\n");
}

static int fail_arg(const char* flag, const char* why) {
    fprintf(stderr, "pi-make-model: %s: %s\n", flag, why);
    return 2;
}

static int parse_int(const char* flag, const char* s, int32_t* out) {
    char* end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < -2147483647L || v > 2147483647L)
        return fail_arg(flag, "expects an integer");
    *out = (int32_t)v;
    return 0;
}

static int parse_u64(const char* flag, const char* s, uint64_t* out) {
    char* end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0)
        return fail_arg(flag, "expects a non-negative integer");
    *out = (uint64_t)v;
    return 0;
}

static int parse_float(const char* flag, const char* s, float* out) {
    char* end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v))
        return fail_arg(flag, "expects a finite number");
    *out = (float)v;
    return 0;
}

static int is(const char* a, const char* name) {
    return strcmp(a, name) == 0;
}

static int parse_args(int argc, char** argv, pi_synth_params* p, const char** out,
                      int* head_kv_given) {
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (is(a, "-h") || is(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (is(a, "--f16"))
            p->f16 = 1;
        else if (is(a, "--f32"))
            p->f16 = 0;
        else if (is(a, "--sparse"))
            p->sparse = 1;
        else if (is(a, "--dense"))
            p->sparse = 0;
        else if (is(a, "--dense-swiglu"))
            p->dense_relu = 0;
        else {
            if (i + 1 >= argc) return fail_arg(a, "unknown flag or missing value (see --help)");
            const char* v = argv[++i];
            int rc = 0;
            if (is(a, "-o") || is(a, "--out"))
                *out = v;
            else if (is(a, "--vocab"))
                p->vocab_path = v;
            else if (is(a, "--arch"))
                p->arch = v;
            else if (is(a, "--n-embd"))
                rc = parse_int(a, v, &p->n_embd);
            else if (is(a, "--n-layer"))
                rc = parse_int(a, v, &p->n_layer);
            else if (is(a, "--n-head"))
                rc = parse_int(a, v, &p->n_head);
            else if (is(a, "--n-head-kv")) {
                rc = parse_int(a, v, &p->n_head_kv);
                *head_kv_given = 1;
            } else if (is(a, "--n-ff"))
                rc = parse_int(a, v, &p->n_ff);
            else if (is(a, "--ctx"))
                rc = parse_int(a, v, &p->n_ctx_train);
            else if (is(a, "--predictor-rank"))
                rc = parse_int(a, v, &p->predictor_rank);
            else if (is(a, "--sparsity"))
                rc = parse_float(a, v, &p->sparsity);
            else if (is(a, "--power-law"))
                rc = parse_float(a, v, &p->power_law);
            else if (is(a, "--predictor-noise"))
                rc = parse_float(a, v, &p->predictor_noise);
            else if (is(a, "--seed"))
                rc = parse_u64(a, v, &p->seed);
            else
                return fail_arg(a, "unknown flag (see --help)");
            if (rc != 0) return rc;
        }
    }
    if (!*out) return fail_arg("-o", "the output path is required");
    if (!p->vocab_path) return fail_arg("--vocab", "the vocabulary file is required");
    return 0;
}

int main(int argc, char** argv) {
    pi_synth_params p = pi_synth_default_params();
    const char* out = NULL;
    int head_kv_given = 0;
    int rc = parse_args(argc, argv, &p, &out, &head_kv_given);
    if (rc != 0) return rc;
    if (!head_kv_given) p.n_head_kv = p.n_head;
    pi_status st = pi_synth_model_write(&p, out);
    if (st != PI_OK) {
        fprintf(stderr, "pi-make-model: %s: %s\n", pi_status_str(st), pi_last_error());
        return 1;
    }
    printf("pi-make-model: wrote %s (%s %s, %s, n_embd %d, n_layer %d, n_ff %d)\n", out,
           p.sparse ? "sparse" : "dense", p.arch ? p.arch : "llama", p.f16 ? "F16" : "F32",
           p.n_embd, p.n_layer, p.n_ff);
    return 0;
}
