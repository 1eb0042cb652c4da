/* powerinfer: generate text from a PowerInfer GGUF model with llama.cpp-style flags. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "powerinfer.h"
#include "sampling_args.h"
#include "tool.h"
#include "tool_args.h"

const char tool_name[] = "powerinfer";

typedef struct options {
    const char* model;
    const char* prompt;
    const char* prompt_file;
    int n_predict, n_threads, n_ctx, n_batch, verbose, dense, reset_gpu_index, disable_gpu_index;
    const char* offload_device;
    const char* activation_stats;
    double vram_budget_gib;
    int vram_budget_given;
    int chat;
    int keep; /* --keep; -2: not given */
    chat_options chat_opts;
    sampling_args sampling;
} options;

static const char usage_general[] =
    "usage: powerinfer -m MODEL [-p PROMPT | -f FILE] [options]\n"
    "       powerinfer -m MODEL -i [--system TEXT] [--chat-template NAME] [options]\n"
    "  -m, --model PATH       model file (PowerInfer GGUF, sparse PWRI or dense GGUF)\n"
    "  -p, --prompt TEXT      prompt (default: empty prompt after BOS)\n"
    "  -f, --file PATH        read the prompt from a file\n"
    "  -n, --n-predict N      tokens to generate, per reply in a chat (default 128; -1 = until\n"
    "                         the end of the text or of the context)\n"
    "  -t, --threads N        CPU threads (default: library default)\n"
    "  -c, --ctx-size N       context size in tokens (default 512, 0 = model's)\n"
    "  -b, --batch-size N     prompt batch size (default 512)\n"
    "      --vram-budget GiB  offload device memory: dense blocks, KV cache, hot FFN neurons\n"
    "      --offload-device D auto (default: CUDA/HIP when usable), cuda, hip, cpu, none\n"
    "      --reset-gpu-index  re-plan instead of using MODEL.generated.gpuidx\n"
    "      --disable-gpu-index keep every FFN neuron on the CPU\n"
    "      --activation-stats P activation statistics for the planner\n"
    "      --dense            compute every FFN neuron (ignore the predictor)\n"
    "      --context-shift    when the context is full, drop half of its tokens and go on\n"
    "      --keep N           tokens a context shift keeps at the start (default: the BOS; in a\n"
    "                         chat, the system message; -1: a completion's whole prompt)\n"
    "      --verbose          log library messages at info level\n"
    "  -h, --help             this text\n"
    "chat (one user message per line on stdin; /exit or end of input ends it):\n"
    "  -i, --chat             interactive chat: the model's chat template, the context keeps\n"
    "                         the transcript so each turn decodes only its new tokens\n"
    "  -sys, --system TEXT    the system message\n"
    "      --chat-template T  llama2, chatml, vicuna, zephyr, mistral, llama3 or a template text\n"
    "                         (default: the model's tokenizer.chat_template)\n"
    "      --verbose-prompt   each turn's prompt tokens (new and cached) and speed on stderr\n";

/* Negative counts the library would refuse are usage errors here; -n < 0 and -s < 0 mean
 * "unbounded" and "random", as in llama.cpp. */
static int parse_args(int argc, char** argv, const char* usage, options* o) {
    tool_args a = tool_args_start(argc, argv, usage);
    while (tool_args_next(&a)) {
        if (sampling_args_parse(&a, &o->sampling))
            continue;
        else if (tool_args_is(&a, NULL, "--verbose"))
            o->verbose = 1;
        else if (tool_args_is(&a, NULL, "--dense"))
            o->dense = 1;
        else if (tool_args_is(&a, NULL, "--reset-gpu-index"))
            o->reset_gpu_index = 1;
        else if (tool_args_is(&a, NULL, "--disable-gpu-index"))
            o->disable_gpu_index = 1;
        else if (tool_args_is(&a, "-m", "--model"))
            o->model = tool_args_text(&a);
        else if (tool_args_is(&a, "-p", "--prompt"))
            o->prompt = tool_args_text(&a);
        else if (tool_args_is(&a, "-f", "--file"))
            o->prompt_file = tool_args_text(&a);
        else if (tool_args_is(&a, "-n", "--n-predict"))
            tool_args_int(&a, INT_MIN, INT_MAX, &o->n_predict);
        else if (tool_args_is(&a, "-t", "--threads"))
            tool_args_int(&a, 0, INT_MAX, &o->n_threads);
        else if (tool_args_is(&a, "-c", "--ctx-size"))
            tool_args_int(&a, 0, INT_MAX, &o->n_ctx);
        else if (tool_args_is(&a, "-b", "--batch-size"))
            tool_args_int(&a, 1, INT_MAX, &o->n_batch);
        else if (tool_args_is(&a, NULL, "--vram-budget"))
            o->vram_budget_given = tool_args_double(&a, -HUGE_VAL, HUGE_VAL, &o->vram_budget_gib);
        else if (tool_args_is(&a, NULL, "--offload-device"))
            o->offload_device = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--activation-stats"))
            o->activation_stats = tool_args_text(&a);
        else if (tool_args_is(&a, "-i", "--chat"))
            o->chat = 1;
        else if (tool_args_is(&a, "-sys", "--system"))
            o->chat_opts.system = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--chat-template"))
            o->chat_opts.chat_template = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--context-shift"))
            o->chat_opts.context_shift = 1;
        else if (tool_args_is(&a, NULL, "--keep"))
            tool_args_int(&a, -1, INT_MAX, &o->keep);
        else if (tool_args_is(&a, NULL, "--verbose-prompt"))
            o->chat_opts.verbose_prompt = 1;
        else
            tool_args_unknown(&a);
    }
    if (!o->model) tool_args_fail(&a, "-m: a model path is required");
    if (o->prompt && o->prompt_file) tool_args_fail(&a, "-f: give either -p or -f, not both");
    if (o->chat && (o->prompt || o->prompt_file))
        tool_args_fail(&a,
                       "%s: not with --chat, whose messages come from stdin (--system sets "
                       "the system message)",
                       o->prompt ? "-p" : "-f");
    if (!o->chat && (o->chat_opts.system || o->chat_opts.chat_template))
        tool_args_fail(&a, "%s: only with --chat",
                       o->chat_opts.system ? "--system" : "--chat-template");
    return tool_args_finish(&a);
}

/* The usage text: the general flags, then the sampling flags. */
static char* usage_text(void) {
    const size_t a = strlen(usage_general), b = strlen(sampling_args_usage);
    char* text = malloc(a + b + 1);
    if (!text) return NULL;
    memcpy(text, usage_general, a);
    memcpy(text + a, sampling_args_usage, b + 1);
    return text;
}

/* Builds the sampler chain once before generating, so that a bad value or a malformed grammar is
 * reported before any text. */
static int check_sampler(const pi_model* model, const pi_sampler_params* params) {
    pi_sampler* sampler = NULL;
    const pi_status st = pi_sampler_create_for_model(model, params, &sampler);
    pi_sampler_free(sampler);
    return st == PI_OK ? 0 : tool_fail_status("the sampling options", st);
}

static int print_piece(const char* text, size_t len, void* user_data) {
    (void)user_data;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 1;
}

/* The prompt figures come from the completion's result when there was one (its prompt may be a
 * single token), else from the context (every turn's multi-token batches). */
static void print_stats(double load_s, const pi_context* ctx, const pi_generate_result* r) {
    pi_context_stats stats = {0};
    stats.struct_size = sizeof(stats);
    pi_context_stats_get(ctx, &stats);
    const double prompt_s = r ? r->prompt_seconds : stats.prompt_seconds;
    const int prompt_tokens =
        r ? r->n_prompt_tokens - r->n_cached_tokens : (int)stats.n_prompt_tokens;
    fputc('\n', stderr);
    tool_note("load time      = %9.2f ms", load_s * 1e3);
    tool_note("prompt eval    = %9.2f ms / %d tokens (%.2f tokens/s)", prompt_s * 1e3,
              prompt_tokens, prompt_s > 0 ? prompt_tokens / prompt_s : 0.0);
    tool_note("decode         = %9.2f ms / %d tokens (%.2f tokens/s)", stats.decode_seconds * 1e3,
              (int)stats.n_decode_tokens,
              stats.decode_seconds > 0 ? stats.n_decode_tokens / stats.decode_seconds : 0.0);
    tool_note("FFN neurons computed = %.1f%%", stats.ffn_active_fraction * 100.0);
}

/* One completion of the prompt, streamed to stdout after the prompt itself. */
/* The prompt's tokens with BOS, for --keep -1. */
static int prompt_tokens(const pi_model* model, const char* prompt) {
    size_t n = 0;
    pi_tokenize_with_flags(model, prompt, strlen(prompt), PI_TOKENIZE_ADD_BOS, NULL, 0, &n);
    return n > 0 && n <= INT_MAX ? (int)n : 1;
}

static int complete(const pi_model* model, pi_context* ctx, const char* prompt, const options* o,
                    pi_generate_result* result) {
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = o->n_predict < 0 ? 0x7fffffff : o->n_predict;
    gp.sampler_params = &o->sampling.params;
    gp.callback = print_piece;
    gp.context_shift = o->chat_opts.context_shift;
    if (o->keep >= 0) gp.n_keep = o->keep;
    if (o->keep == -1) gp.n_keep = prompt_tokens(model, prompt);
    fputs(prompt, stdout);
    const pi_status st = pi_generate(ctx, prompt, &gp, result);
    fputc('\n', stdout);
    return st < 0 ? tool_fail_status("generating", st) : 0;
}

static pi_model_params model_params(const options* o) {
    pi_model_params mp = pi_model_default_params();
    mp.dense = o->dense;
    if (o->vram_budget_given) mp.vram_budget = o->vram_budget_gib * 1073741824.0;
    mp.reset_gpu_index = o->reset_gpu_index;
    mp.disable_gpu_index = o->disable_gpu_index;
    mp.offload_device = o->offload_device;
    mp.activation_stats = o->activation_stats;
    mp.kv_n_ctx = o->n_ctx; /* as PowerInfer loading a model with its context: KV cache on the
                               device when it fits */
    return mp;
}

static void note_offload(const pi_model* model, const options* o) {
    pi_model_info info;
    info.struct_size = sizeof(info);
    if (pi_model_info_get(model, &info) != PI_OK || !(o->vram_budget_given || o->offload_device))
        return;
    if (info.offload_device[0])
        tool_note("%.1f MiB of weights (dense blocks and hot FFN neurons) on %s%s",
                  info.offload_bytes / 1048576.0, info.offload_device,
                  info.kv_n_ctx_on_device > 0 ? ", KV cache too" : "");
    else
        tool_note("no GPU backend is active: running on the CPU (see pi_system_info)");
}

/* Loads the model, makes the context and runs the completion or the chat. */
static int run(const options* o, const char* prompt) {
    const pi_model_params mp = model_params(o);
    pi_model* model = NULL;
    const double t0 = tool_seconds();
    pi_status st = pi_model_load(o->model, &mp, &model);
    if (st != PI_OK) return tool_fail_status("loading the model", st);
    const double load_s = tool_seconds() - t0;
    note_offload(model, o);
    int rc = check_sampler(model, &o->sampling.params);
    pi_context* ctx = NULL;
    if (rc == 0) {
        pi_context_params cp = pi_context_default_params();
        cp.n_ctx = o->n_ctx;
        cp.n_batch = o->n_batch;
        if (o->n_threads) cp.n_threads = o->n_threads;
        st = pi_context_create(model, &cp, &ctx);
        if (st != PI_OK) rc = tool_fail_status("creating the context", st);
    }
    if (rc == 0 && o->chat) {
        chat_options co = o->chat_opts;
        co.keep = o->keep >= 0 ? o->keep : -1;
        co.max_tokens = o->n_predict < 0 ? 0x7fffffff : o->n_predict;
        rc = chat_run(model, ctx, &co, &o->sampling.params);
        if (rc == 0) print_stats(load_s, ctx, NULL);
    } else if (rc == 0) {
        pi_generate_result result = {0};
        result.struct_size = sizeof(result);
        rc = complete(model, ctx, prompt, o, &result);
        if (rc == 0) print_stats(load_s, ctx, &result);
    }
    pi_context_free(ctx);
    pi_model_free(model);
    return rc;
}

int main(int argc, char** argv) {
    options o = {0};
    o.n_predict = 128;
    o.n_ctx = 512;
    o.n_batch = 512;
    o.keep = -2;
    sampling_args_init(&o.sampling);
    char* usage = usage_text();
    if (!usage) return tool_fail(1, "out of memory");
    int rc = parse_args(argc, argv, usage, &o);
    free(usage);
    if (rc == 0) rc = sampling_args_finish(&o.sampling);
    if (rc) {
        sampling_args_free(&o.sampling);
        return rc;
    }
    if (o.verbose) pi_log_set(tool_log_to_stderr, NULL);

    char* prompt_buf = NULL;
    if (o.prompt_file && !(prompt_buf = tool_read_file(o.prompt_file, NULL))) {
        rc = tool_fail(1, "-f: cannot read '%s': %s", o.prompt_file, strerror(errno));
    } else {
        rc = run(&o, prompt_buf ? prompt_buf : (o.prompt ? o.prompt : ""));
    }
    free(prompt_buf);
    sampling_args_free(&o.sampling);
    return rc;
}
