/*
 * A program built against the 0.1.0 header (tests/abi/frozen/powerinfer-0.1.0.h, frozen when
 * 0.2 began) run against today's library: every struct it passes has 0.1's layout and size
 * (pi_generate_params still embeds 0.1's pi_sampler_params), every struct it receives has 0.1's
 * size. It must work unchanged (docs/abi.md).
 *
 *   frozen_0_1 MODEL.gguf
 */
#include "frozen/powerinfer-0.1.0.h"

#include "abi_checks.h"

/* 0.1's contract: pi_generate starts from the prompt whatever the context holds. */
static void greedy(pi_context* ctx, const char* prompt, text_buffer* out, pi_generate_result* r) {
    pi_generate_params params = pi_generate_default_params();
    CHECK(params.struct_size == sizeof(pi_generate_params));
    CHECK(params.sampling.struct_size == sizeof(pi_sampler_params));
    params.max_tokens = 8;
    params.sampling.temperature = 0.0f;
    params.callback = collect;
    params.user_data = out;
    r->struct_size = sizeof *r;
    CHECK(pi_generate(ctx, prompt, &params, r) == PI_OK);
    CHECK(r->struct_size == sizeof *r);
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: frozen_0_1 MODEL.gguf\n");
        return 2;
    }
    CHECK(strncmp(pi_version(), "0.", 2) == 0);

    pi_model_params model_params = pi_model_default_params();
    CHECK(model_params.struct_size == sizeof(pi_model_params));
    pi_model* model = NULL;
    if (pi_model_load(argv[1], &model_params, &model) != PI_OK) {
        fprintf(stderr, "pi_model_load: %s\n", pi_last_error());
        return 1;
    }
    pi_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(pi_model_info_get(model, &info) == PI_OK);
    CHECK(info.struct_size == sizeof info);
    CHECK(info.n_layer == 2 && info.n_vocab == pi_n_vocab(model));

    pi_context_params context_params = pi_context_default_params();
    context_params.n_ctx = 96;
    context_params.n_threads = 1;
    pi_context* ctx = NULL;
    pi_context* other = NULL;
    CHECK(pi_context_create(model, &context_params, &ctx) == PI_OK);
    CHECK(pi_context_create(model, &context_params, &other) == PI_OK);
    if (!ctx || !other) return 1;

    static text_buffer first, again, elsewhere, longer;
    pi_generate_result r1, r2, r3;
    greedy(ctx, "The quick brown fox", &first, &r1);
    greedy(ctx, "The quick brown fox", &again, &r2);
    greedy(other, "The quick brown fox", &elsewhere, &r3);
    CHECK(r1.n_prompt_tokens > 0 && r1.n_generated_tokens > 0);
    CHECK(strcmp(first.text, again.text) == 0);
    CHECK(strcmp(first.text, elsewhere.text) == 0);
    CHECK(r1.n_prompt_tokens == r2.n_prompt_tokens);
    /* A different prompt on the used context gives what it gives on a fresh one. */
    static text_buffer fresh;
    pi_generate_result r4, r5;
    greedy(ctx, "Once upon a time", &longer, &r4);
    pi_context* third = NULL;
    CHECK(pi_context_create(model, &context_params, &third) == PI_OK);
    greedy(third, "Once upon a time", &fresh, &r5);
    CHECK(strcmp(longer.text, fresh.text) == 0);

    /* Decoding by hand, 0.1's sampler and the stats. */
    pi_token tokens[32];
    size_t n = 0;
    CHECK(pi_tokenize(model, "In the beginning", 16, 1, tokens, 32, &n) == PI_OK);
    CHECK(pi_kv_truncate(third, 0) == PI_OK);
    pi_batch batch = {(int32_t)n, tokens, NULL, NULL};
    CHECK(pi_decode(third, &batch) == PI_OK);
    CHECK(pi_context_n_past(third) == (int32_t)n);
    pi_sampler_params sampler_params = pi_sampler_default_params();
    sampler_params.seed = 3;
    pi_sampler* sampler = NULL;
    CHECK(pi_sampler_create(&sampler_params, &sampler) == PI_OK);
    pi_token next = -1;
    CHECK(pi_sample(sampler, pi_get_logits(third, -1), info.n_vocab, &next) == PI_OK);
    CHECK(next >= 0 && next < info.n_vocab);
    pi_context_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    CHECK(pi_context_stats_get(third, &stats) == PI_OK);
    CHECK(stats.n_prompt_tokens >= n);

    pi_sampler_free(sampler);
    pi_context_free(third);
    pi_context_free(other);
    pi_context_free(ctx);
    pi_model_free(model);
    printf("0.1 program on %s: \"%s\"\n", pi_version(), first.text);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
