/* powerinfer: generate text from a PowerInfer GGUF model with llama.cpp-style flags. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "powerinfer.h"
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
    int64_t seed;
    float temp, top_p;
    int top_k;
    double vram_budget_gib;
    int vram_budget_given;
} options;

static const char usage[] =
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
    "  -h, --help             this text\n";

/* Negative counts the library would refuse are usage errors here; -n < 0 and -s < 0 mean
 * "unbounded" and "random", as in llama.cpp. */
static int parse_args(int argc, char** argv, options* o) {
    tool_args a = tool_args_start(argc, argv, usage);
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, NULL, "--verbose"))
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
        else if (tool_args_is(&a, "-s", "--seed"))
            tool_args_int64(&a, INT32_MIN, UINT32_MAX, &o->seed);
        else if (tool_args_is(&a, NULL, "--temp"))
            tool_args_float(&a, -HUGE_VAL, HUGE_VAL, &o->temp);
        else if (tool_args_is(&a, NULL, "--top-k"))
            tool_args_int(&a, INT_MIN, INT_MAX, &o->top_k);
        else if (tool_args_is(&a, NULL, "--top-p"))
            tool_args_float(&a, -HUGE_VAL, HUGE_VAL, &o->top_p);
        else if (tool_args_is(&a, NULL, "--vram-budget"))
            o->vram_budget_given = tool_args_double(&a, -HUGE_VAL, HUGE_VAL, &o->vram_budget_gib);
        else if (tool_args_is(&a, NULL, "--offload-device"))
            o->offload_device = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--activation-stats"))
            o->activation_stats = tool_args_text(&a);
        else
            tool_args_unknown(&a);
    }
    if (!o->model) tool_args_fail(&a, "-m: a model path is required");
    if (o->prompt && o->prompt_file) tool_args_fail(&a, "-f: give either -p or -f, not both");
    return tool_args_finish(&a);
}

static int print_piece(const char* text, size_t len, void* user_data) {
    (void)user_data;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
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
    if (o.verbose) pi_log_set(tool_log_to_stderr, NULL);

    char* prompt_buf = NULL;
    if (o.prompt_file && !(prompt_buf = tool_read_file(o.prompt_file, NULL)))
        return tool_fail(1, "-f: cannot read '%s': %s", o.prompt_file, strerror(errno));
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
    const double t0 = tool_seconds();
    pi_status st = pi_model_load(o.model, &mp, &model);
    if (st != PI_OK) {
        free(prompt_buf);
        return tool_fail_status("loading the model", st);
    }
    const double load_s = tool_seconds() - t0;
    pi_model_info info;
    info.struct_size = sizeof(info);
    if (pi_model_info_get(model, &info) == PI_OK && (o.vram_budget_given || o.offload_device)) {
        if (info.offload_device[0])
            tool_note("%.1f MiB of weights (dense blocks and hot FFN neurons) on %s%s",
                      info.offload_bytes / 1048576.0, info.offload_device,
                      info.kv_n_ctx_on_device > 0 ? ", KV cache too" : "");
        else
            tool_note("no GPU backend is active: running on the CPU (see pi_system_info)");
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
        return tool_fail_status("creating the context", st);
    }

    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = o.n_predict < 0 ? 0x7fffffff : o.n_predict;
    gp.temperature = o.temp;
    gp.top_k = o.top_k;
    gp.top_p = o.top_p;
    gp.seed = o.seed < 0 ? PI_SEED_RANDOM : (uint32_t)o.seed;
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
        return tool_fail_status("generating", st);
    }
    pi_context_stats stats = {0};
    stats.struct_size = sizeof(stats);
    pi_context_stats_get(ctx, &stats);
    fputc('\n', stderr);
    tool_note("load time      = %9.2f ms", load_s * 1e3);
    tool_note("prompt eval    = %9.2f ms / %d tokens (%.2f tokens/s)", res.prompt_seconds * 1e3,
              res.n_prompt_tokens,
              res.prompt_seconds > 0 ? res.n_prompt_tokens / res.prompt_seconds : 0.0);
    tool_note("decode         = %9.2f ms / %d tokens (%.2f tokens/s)", stats.decode_seconds * 1e3,
              (int)stats.n_decode_tokens,
              stats.decode_seconds > 0 ? stats.n_decode_tokens / stats.decode_seconds : 0.0);
    tool_note("FFN neurons computed = %.1f%%", stats.ffn_active_fraction * 100.0);
    pi_context_free(ctx);
    pi_model_free(model);
    free(prompt_buf);
    return 0;
}
