/* pi-perplexity: perplexity of a model on a text, by llama.cpp's method (docs/quantization.md):
 * non-overlapping windows of n_ctx tokens, each starting from an empty cache with BOS in its
 * first slot, scoring only the second half of every window. --dense scores a sparse file twice,
 * with its predictor and with every FFN neuron, window by window. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "powerinfer.h"
#include "tool.h"
#include "tool_args.h"

const char tool_name[] = "pi-perplexity";

typedef struct options {
    const char *model, *text;
    int n_ctx, n_batch, n_chunks, n_threads, json, dense, verbose;
} options;

/* The largest -c, -b, --chunks and -t. */
enum { max_count = 1000000000 };

static const char usage[] =
    "usage: pi-perplexity -m MODEL -f TEXT [-c N_CTX] [-b N] [--chunks K] [-t N] [--json]\n"
    "  -m, --model PATH     model file\n"
    "  -f, --file PATH      UTF-8 text; needs at least 2 * N_CTX tokens\n"
    "  -c, --ctx-size N     window length in tokens (default 512; 0 = the model's; >= 4)\n"
    "  -b, --batch-size N   tokens per decode call (default 512; at most N_CTX)\n"
    "      --chunks K       evaluate at most K windows (default: all)\n"
    "  -t, --threads N      CPU threads (default: library default)\n"
    "      --dense          also compute every FFN neuron (no predictor) and print both\n"
    "                       perplexities side by side (a dense file is scored once)\n"
    "      --json           print a JSON summary on stdout (progress goes to stderr)\n"
    "      --verbose        log library messages at info level\n"
    "  -h, --help           this text\n"
    "Prints [i]ppl, after every window and 'Final estimate: PPL = x +/- y'; with --dense\n"
    "on a sparse file '[i] sparse x, dense y' and 'Final estimate: sparse PPL = x +/- y,\n"
    "dense PPL = x +/- y, ratio r' (r = sparse / dense).\n"
    "Exit status: 0 done, 1 failed (model, text too short), 2 bad arguments.\n";

static int parse_args(int argc, char** argv, options* o) {
    tool_args a = tool_args_start(argc, argv, usage);
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, NULL, "--json"))
            o->json = 1;
        else if (tool_args_is(&a, NULL, "--dense"))
            o->dense = 1;
        else if (tool_args_is(&a, NULL, "--verbose"))
            o->verbose = 1;
        else if (tool_args_is(&a, "-m", "--model"))
            o->model = tool_args_text(&a);
        else if (tool_args_is(&a, "-f", "--file"))
            o->text = tool_args_text(&a);
        else if (tool_args_is(&a, "-c", "--ctx-size"))
            tool_args_int(&a, 0, max_count, &o->n_ctx);
        else if (tool_args_is(&a, "-b", "--batch-size"))
            tool_args_int(&a, 1, max_count, &o->n_batch);
        else if (tool_args_is(&a, NULL, "--chunks"))
            tool_args_int(&a, 1, max_count, &o->n_chunks);
        else if (tool_args_is(&a, "-t", "--threads"))
            tool_args_int(&a, 1, max_count, &o->n_threads);
        else
            tool_args_unknown(&a);
    }
    if (!o->model) tool_args_fail(&a, "-m: a model path is required");
    if (!o->text) tool_args_fail(&a, "-f: a text file is required");
    if (o->n_ctx != 0 && o->n_ctx < 4)
        tool_args_fail(&a, "-c: the window must be at least 4 tokens");
    return tool_args_finish(&a);
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

/* One way of running the model (sparse or dense) and what it scored so far. */
typedef struct pass {
    pi_model* model;
    pi_context* ctx;
    double nll, nll2;
    long long count;
    double* chunk_ppl;
} pass;

/* The final numbers of a pass: llama.cpp's estimate, PPL = exp(mean NLL) with the standard
 * error of the mean NLL carried through exp to first order. */
typedef struct estimate {
    double mean, ppl, stderr_ppl;
    int valid; /* the variance of the NLL is positive */
} estimate;

static estimate estimate_of(const pass* p) {
    estimate e;
    e.mean = p->nll / (double)p->count;
    e.ppl = exp(e.mean);
    const double var = p->nll2 / (double)p->count - e.mean * e.mean;
    e.valid = var > 0.0;
    e.stderr_ppl = var > 0.0 && p->count > 1 ? sqrt(var / (double)(p->count - 1)) * e.ppl : 0.0;
    return e;
}

typedef struct run {
    pass passes[2]; /* [0]: as the model loads by default; [1]: every neuron (--dense) */
    int n_passes;
    pi_token* tokens;
    size_t n_tokens;
    pi_token* batch_tokens;
    int32_t* batch_pos;
    int8_t* batch_logits;
} run;

static void run_free(run* r) {
    for (int i = 0; i < 2; ++i) {
        pi_context_free(r->passes[i].ctx);
        pi_model_free(r->passes[i].model);
        free(r->passes[i].chunk_ppl);
    }
    free(r->tokens);
    free(r->batch_tokens);
    free(r->batch_pos);
    free(r->batch_logits);
}

static int die(run* r, const char* what, pi_status st) {
    tool_fail_status(what, st); /* before the frees, which may replace pi_last_error() */
    run_free(r);
    return 1;
}

typedef struct window {
    size_t start; /* first token of the window in the text */
    int n_ctx, n_batch, first, n_vocab, add_bos;
    pi_token bos;
} window;

/* Decodes one window on p's context and adds the NLL of its scored positions to p. */
static pi_status score_window(run* r, pass* p, const window* w, const char** what) {
    *what = "clearing the cache";
    pi_status st = pi_kv_truncate(p->ctx, 0);
    if (st != PI_OK) return st;
    for (int j = 0; j * w->n_batch < w->n_ctx; ++j) {
        const int batch_first = j * w->n_batch;
        const int size = w->n_ctx - batch_first < w->n_batch ? w->n_ctx - batch_first : w->n_batch;
        for (int k = 0; k < size; ++k) {
            r->batch_tokens[k] = r->tokens[w->start + (size_t)batch_first + (size_t)k];
            r->batch_pos[k] = batch_first + k;
        }
        if (w->add_bos && j == 0) r->batch_tokens[0] = w->bos;
        const pi_batch batch = {size, r->batch_tokens, r->batch_pos, r->batch_logits};
        *what = "decoding";
        st = pi_decode(p->ctx, &batch);
        if (st != PI_OK) return st;
        for (int k = 0; k < size; ++k) {
            const int pos = batch_first + k;
            if (pos < w->first || pos > w->n_ctx - 2) continue;
            const float* logits = pi_get_logits(p->ctx, k);
            *what = "reading logits";
            if (!logits) return PI_ERR_INTERNAL;
            const double v = nll_of(logits, w->n_vocab, r->tokens[w->start + (size_t)pos + 1]);
            p->nll += v;
            p->nll2 += v * v;
            ++p->count;
        }
    }
    return PI_OK;
}

static pi_status open_pass(pass* p, const char* path, int dense, const char** what) {
    pi_model_params mp = pi_model_default_params();
    mp.dense = dense;
    *what = dense ? "loading the model with every neuron (--dense)" : "loading the model";
    return pi_model_load(path, &mp, &p->model);
}

static void json_chunks(const pass* p, int n_chunk) {
    printf(", \"chunk_ppl\": [");
    for (int i = 0; i < n_chunk; ++i) {
        if (i) printf(", ");
        if (isfinite(p->chunk_ppl[i]))
            printf("%.9g", p->chunk_ppl[i]);
        else
            printf("null");
    }
    printf("]");
}

static void print_estimate(FILE* out, const char* name, const estimate* e) {
    fprintf(out, "%sPPL = %.4f +/- %.5f", name, e->ppl, e->stderr_ppl);
}

static void json_pass(const pass* p, const estimate* e, int n_chunk) {
    json_number(stdout, "nll_mean", e->mean);
    json_number(stdout, "ppl", e->ppl);
    json_number(stdout, "ppl_stderr", e->stderr_ppl);
    json_chunks(p, n_chunk);
}

int main(int argc, char** argv) {
    options o = {0};
    o.n_ctx = 512;
    o.n_batch = 512;
    o.n_chunks = -1;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (o.verbose) pi_log_set(tool_log_to_stderr, NULL);
    FILE* human = o.json ? stderr : stdout;

    size_t text_len = 0;
    char* text = tool_read_file(o.text, &text_len);
    if (!text) {
        return tool_fail(1, "-f: cannot read '%s': %s", o.text, strerror(errno));
    }

    run r = {0};
    const char* what = "";
    /* The first pass runs the model as it loads by default: sparse on a sparse file. */
    pi_status st = open_pass(&r.passes[0], o.model, 0, &what);
    if (st != PI_OK) {
        free(text);
        return die(&r, what, st);
    }
    pi_model* model = r.passes[0].model;
    pi_model_info info;
    info.struct_size = sizeof(info);
    st = pi_model_info_get(model, &info);
    if (st != PI_OK) {
        free(text);
        return die(&r, "reading the model's information", st);
    }
    r.n_passes = 1;
    if (o.dense && info.sparse_inference) {
        st = open_pass(&r.passes[1], o.model, 1, &what);
        if (st != PI_OK) {
            free(text);
            return die(&r, what, st);
        }
        r.n_passes = 2;
    } else if (o.dense) {
        tool_note("--dense: %s is a dense file (no predictor): every neuron is computed already, "
                  "so it is scored once",
                  o.model);
    }

    const pi_token bos = pi_token_bos(model);
    /* Each window starts with BOS where the vocabulary uses one (SPM; not Falcon's BPE), as in
     * llama.cpp's perplexity. */
    const int add_bos = bos >= 0 && pi_vocab_adds_bos(model);
    st = pi_tokenize(model, text, text_len, add_bos, NULL, 0, &r.n_tokens);
    if (st != PI_OK && st != PI_ERR_INVALID_ARGUMENT) {
        free(text);
        return die(&r, "tokenizing", st);
    }
    r.tokens = malloc((r.n_tokens ? r.n_tokens : 1) * sizeof(pi_token));
    if (!r.tokens) {
        free(text);
        run_free(&r);
        return tool_fail(1, "out of memory");
    }
    st = pi_tokenize(model, text, text_len, add_bos, r.tokens, r.n_tokens, &r.n_tokens);
    free(text);
    if (st != PI_OK) return die(&r, "tokenizing", st);

    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_batch = o.n_ctx != 0 && o.n_batch > o.n_ctx ? o.n_ctx : o.n_batch;
    if (o.n_threads) cp.n_threads = o.n_threads;
    for (int i = 0; i < r.n_passes; ++i) {
        st = pi_context_create(r.passes[i].model, &cp, &r.passes[i].ctx);
        if (st != PI_OK) return die(&r, "creating the context", st);
    }
    const int n_ctx = pi_context_n_ctx(r.passes[0].ctx);
    const int n_batch = cp.n_batch < n_ctx ? cp.n_batch : n_ctx;
    if (n_ctx < 4) {
        run_free(&r);
        return tool_fail(2, "-c: the window must be at least 4 tokens, got %d", n_ctx);
    }
    if (r.n_tokens < 2 * (size_t)n_ctx) {
        run_free(&r);
        return tool_fail(1, "%s has %zu tokens; at least %d (2 * n_ctx) are needed for -c %d",
                         o.text, r.n_tokens, 2 * n_ctx, n_ctx);
    }
    const int n_chunk_max = (int)(r.n_tokens / (size_t)n_ctx);
    const int n_chunk = o.n_chunks < 0 || o.n_chunks > n_chunk_max ? n_chunk_max : o.n_chunks;
    window w = {0, n_ctx, n_batch, n_ctx / 2, pi_n_vocab(model), add_bos, bos};

    r.batch_tokens = malloc((size_t)n_batch * sizeof(pi_token));
    r.batch_pos = malloc((size_t)n_batch * sizeof(int32_t));
    r.batch_logits = malloc((size_t)n_batch);
    int allocated = r.batch_tokens && r.batch_pos && r.batch_logits;
    for (int i = 0; i < r.n_passes; ++i) {
        r.passes[i].chunk_ppl = malloc((size_t)n_chunk * sizeof(double));
        allocated = allocated && r.passes[i].chunk_ppl;
    }
    if (!allocated) {
        run_free(&r);
        return tool_fail(1, "out of memory");
    }
    memset(r.batch_logits, 1, (size_t)n_batch);
    tool_note("%zu tokens, %d chunks of %d, batch %d, scoring positions %d..%d%s", r.n_tokens,
              n_chunk, n_ctx, n_batch, w.first, n_ctx - 2,
              r.n_passes == 2 ? ", sparse and dense" : "");

    const double t0 = tool_seconds();
    for (int i = 0; i < n_chunk; ++i) {
        w.start = (size_t)i * (size_t)n_ctx;
        for (int k = 0; k < r.n_passes; ++k) {
            pass* p = &r.passes[k];
            st = score_window(&r, p, &w, &what);
            if (st != PI_OK) return die(&r, what, st);
            p->chunk_ppl[i] = exp(p->nll / (double)p->count);
        }
        if (i == 0) {
            const double per_chunk = tool_seconds() - t0;
            tool_note("%.2f seconds per chunk, ETA %.1f minutes", per_chunk,
                      per_chunk * (n_chunk - 1) / 60.0);
        }
        if (r.n_passes == 2)
            fprintf(human, "[%d] sparse %.4f, dense %.4f\n", i + 1, r.passes[0].chunk_ppl[i],
                    r.passes[1].chunk_ppl[i]);
        else
            fprintf(human, "[%d]%.4f,", i + 1, r.passes[0].chunk_ppl[i]);
        fflush(human);
    }
    if (r.n_passes == 1) fputc('\n', human);
    const double seconds = tool_seconds() - t0;

    const estimate e = estimate_of(&r.passes[0]);
    const estimate d = r.n_passes == 2 ? estimate_of(&r.passes[1]) : e;
    if (!e.valid || !d.valid) {
        fprintf(human, "Unexpected negative standard deviation of log(prob)\n");
    } else if (r.n_passes == 2) {
        fprintf(human, "Final estimate: ");
        print_estimate(human, "sparse ", &e);
        fprintf(human, ", ");
        print_estimate(human, "dense ", &d);
        fprintf(human, ", ratio %.4f\n", e.ppl / d.ppl);
    } else {
        fprintf(human, "Final estimate: ");
        print_estimate(human, "", &e);
        fputc('\n', human);
    }

    if (o.json) {
        printf("{\"model\": ");
        json_string(stdout, o.model);
        printf(", \"text\": ");
        json_string(stdout, o.text);
        printf(", \"n_ctx\": %d, \"n_batch\": %d, \"n_tokens\": %zu, \"n_chunks\": %d, "
               "\"n_scored\": %lld, \"sparse_inference\": %s",
               n_ctx, n_batch, r.n_tokens, n_chunk, r.passes[0].count,
               info.sparse_inference ? "true" : "false");
        json_pass(&r.passes[0], &e, n_chunk);
        printf(", \"seconds\": %.3f", seconds);
        if (r.n_passes == 2) {
            printf(", \"dense\": {\"n_scored\": %lld", r.passes[1].count);
            json_pass(&r.passes[1], &d, n_chunk);
            printf("}");
            json_number(stdout, "ppl_ratio", e.ppl / d.ppl);
        }
        printf("}\n");
    }
    run_free(&r);
    return 0;
}
