/* pi-make-model: write a synthetic PowerInfer-format model (docs/synthetic-models.md). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "powerinfer.h"
#include "tool.h"
#include "tool_args.h"

const char tool_name[] = "pi-make-model";

static const char usage[] =
    "usage: pi-make-model -o OUT --vocab PATH [options]\n"
    "Writes a synthetic model with random weights, realistic activation sparsity and an\n"
    "exact (or deliberately noisy) activation predictor.\n"
    "  -o, --out PATH           output file (required)\n"
    "      --vocab PATH         vocab-only GGUF whose tokenizer.* keys are copied "
    "(required)\n"
    "      --arch NAME          llama (or llama-relu; ReGLU, default), prosparse (ReGLU,\n"
    "                           arch llama, sparser by default), bamboo (relu(gate)*relu(up)),\n"
    "                           falcon (7B-style), falcon-40b (attn_norm_2, grouped KV heads)\n"
    "                           or opt\n"
    "      --n-embd N           embedding length (default 256)\n"
    "      --n-layer N          layers (default 2)\n"
    "      --n-head N           attention heads (default 8)\n"
    "      --n-head-kv N        key/value heads, divides n-head (default: n-head; falcon 1;\n"
    "                           falcon-40b n-head/2 when even)\n"
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
    "(default 0.9;\n"
    "                           prosparse 0.95)\n"
    "      --power-law F        skew of per-neuron firing frequency, 0 = uniform "
    "(default 1)\n"
    "      --predictor-noise F  relative noise on fc2, 0 = exact predictor (default 0)\n"
    "      --seed N             random seed (default 1)\n"
    "  -h, --help               this text\n";

typedef struct given {
    int head_kv, sparsity;
} given;

static int parse_args(int argc, char** argv, pi_synth_params* p, const char** out, given* g) {
    tool_args a = tool_args_start(argc, argv, usage);
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, NULL, "--f16"))
            p->f16 = 1;
        else if (tool_args_is(&a, NULL, "--f32"))
            p->f16 = 0;
        else if (tool_args_is(&a, NULL, "--sparse"))
            p->sparse = 1;
        else if (tool_args_is(&a, NULL, "--dense"))
            p->sparse = 0;
        else if (tool_args_is(&a, NULL, "--dense-swiglu"))
            p->dense_relu = 0;
        else if (tool_args_is(&a, "-o", "--out"))
            *out = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--vocab"))
            p->vocab_path = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--arch"))
            p->arch = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--n-embd"))
            tool_args_int(&a, INT_MIN, INT_MAX, &p->n_embd);
        else if (tool_args_is(&a, NULL, "--n-layer"))
            tool_args_int(&a, INT_MIN, INT_MAX, &p->n_layer);
        else if (tool_args_is(&a, NULL, "--n-head"))
            tool_args_int(&a, INT_MIN, INT_MAX, &p->n_head);
        else if (tool_args_is(&a, NULL, "--n-head-kv"))
            g->head_kv = tool_args_int(&a, INT_MIN, INT_MAX, &p->n_head_kv);
        else if (tool_args_is(&a, NULL, "--n-ff"))
            tool_args_int(&a, INT_MIN, INT_MAX, &p->n_ff);
        else if (tool_args_is(&a, NULL, "--ctx"))
            tool_args_int(&a, INT_MIN, INT_MAX, &p->n_ctx_train);
        else if (tool_args_is(&a, NULL, "--predictor-rank"))
            tool_args_int(&a, INT_MIN, INT_MAX, &p->predictor_rank);
        else if (tool_args_is(&a, NULL, "--sparsity"))
            g->sparsity = tool_args_float(&a, -HUGE_VAL, HUGE_VAL, &p->sparsity);
        else if (tool_args_is(&a, NULL, "--power-law"))
            tool_args_float(&a, -HUGE_VAL, HUGE_VAL, &p->power_law);
        else if (tool_args_is(&a, NULL, "--predictor-noise"))
            tool_args_float(&a, -HUGE_VAL, HUGE_VAL, &p->predictor_noise);
        else if (tool_args_is(&a, NULL, "--seed"))
            tool_args_uint64(&a, 0, UINT64_MAX, &p->seed);
        else
            tool_args_unknown(&a);
    }
    if (!*out) tool_args_fail(&a, "-o: the output path is required");
    if (!p->vocab_path) tool_args_fail(&a, "--vocab: the vocabulary file is required");
    return tool_args_finish(&a);
}

static int arch_is(const pi_synth_params* p, const char* name) {
    return p->arch && strcmp(p->arch, name) == 0;
}

/* The family defaults of docs/synthetic-models.md, "Families", for what the flags left open. */
static void family_defaults(pi_synth_params* p, const given* g) {
    if (!g->head_kv) {
        p->n_head_kv = p->n_head;
        if (arch_is(p, "falcon")) p->n_head_kv = 1; /* Falcon-7B: multi-query */
        if (arch_is(p, "falcon-40b") && p->n_head % 2 == 0) p->n_head_kv = p->n_head / 2;
    }
    if (!g->sparsity && arch_is(p, "prosparse")) p->sparsity = 0.95f;
}

int main(int argc, char** argv) {
    pi_synth_params p = pi_synth_default_params();
    const char* out = NULL;
    given g = {0, 0};
    int rc = parse_args(argc, argv, &p, &out, &g);
    if (rc != 0) return rc;
    family_defaults(&p, &g);
    pi_status st = pi_synth_model_write(&p, out);
    if (st != PI_OK) return tool_fail_status(NULL, st);
    printf("pi-make-model: wrote %s (%s %s, %s, n_embd %d, n_layer %d, n_ff %d)\n", out,
           p.sparse ? "sparse" : "dense", p.arch ? p.arch : "llama", p.f16 ? "F16" : "F32",
           p.n_embd, p.n_layer, p.n_ff);
    return 0;
}
