/*
 * hello.c — the smallest complete libpowerinfer program: load a model, stream a completion of
 * a prompt, print the run's statistics.
 *
 *   hello MODEL.gguf ["prompt"]
 */
#include <powerinfer.h>

#include <stdio.h>

static int print_piece(const char* text, size_t len, void* user_data) {
    (void)user_data;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 1; /* 0 would stop the generation */
}

static pi_status generate(pi_context* ctx, const char* prompt) {
    pi_generate_params params = pi_generate_default_params();
    params.max_tokens = 64;
    params.callback = print_piece;
    pi_generate_result result = {.struct_size = sizeof(pi_generate_result)};

    fputs(prompt, stdout);
    pi_status status = pi_generate(ctx, prompt, &params, &result);
    putchar('\n');
    if (status < 0) return status;

    pi_context_stats stats = {.struct_size = sizeof(pi_context_stats)};
    pi_context_stats_get(ctx, &stats);
    double rate = result.decode_seconds > 0 ? result.n_generated_tokens / result.decode_seconds : 0;
    fprintf(stderr, "prompt: %d tokens in %.3f s; generated: %d tokens in %.3f s (%.1f tokens/s)\n",
            result.n_prompt_tokens, result.prompt_seconds, result.n_generated_tokens,
            result.decode_seconds, rate);
    fprintf(stderr, "FFN neurons computed: %.1f%%\n", 100.0 * stats.ffn_active_fraction);
    return status;
}

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]);
        return 2;
    }
    const char* prompt = argc == 3 ? argv[2] : "Once upon a time";
    pi_model_params model_params = pi_model_default_params();
    pi_context_params context_params = pi_context_default_params();
    pi_model* model = NULL;
    pi_context* ctx = NULL;

    const char* step = "pi_model_load";
    pi_status status = pi_model_load(argv[1], &model_params, &model);
    if (status == PI_OK) {
        step = "pi_context_create";
        status = pi_context_create(model, &context_params, &ctx);
    }
    if (status == PI_OK) {
        step = "pi_generate";
        status = generate(ctx, prompt);
    }
    /* Report before freeing: pi_last_error() is valid until this thread's next call. */
    if (status < 0) fprintf(stderr, "%s: %s: %s\n", step, pi_status_str(status), pi_last_error());

    pi_context_free(ctx);
    pi_model_free(model);
    return status < 0 ? 1 : 0;
}
