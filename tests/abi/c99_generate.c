/*
 * The public header as a strict C99 program sees it (built with -std=c99 -pedantic -Werror):
 * status names, argument checks that report errors instead of crashing, NULL-tolerant frees
 * and, given a model path, greedy generation that is repeatable.
 *
 *   c99_generate [MODEL.gguf]
 */
#include <powerinfer.h>

#include "abi_checks.h"

/* A rejected argument is PI_ERR_INVALID_ARGUMENT with a message. */
#define CHECK_INVALID(call)                                                                        \
    do {                                                                                           \
        pi_status status_ = (call);                                                                \
        CHECK(status_ == PI_ERR_INVALID_ARGUMENT);                                                 \
        CHECK(pi_last_error()[0] != '\0');                                                         \
    } while (0)

static void check_status_names(void) {
    static const struct {
        pi_status status;
        const char* name;
    } names[] = {
        {PI_OK, "PI_OK"},
        {PI_STATUS_CANCELLED, "PI_STATUS_CANCELLED"},
        {PI_ERR_INVALID_ARGUMENT, "PI_ERR_INVALID_ARGUMENT"},
        {PI_ERR_IO, "PI_ERR_IO"},
        {PI_ERR_FORMAT, "PI_ERR_FORMAT"},
        {PI_ERR_UNSUPPORTED, "PI_ERR_UNSUPPORTED"},
        {PI_ERR_OUT_OF_MEMORY, "PI_ERR_OUT_OF_MEMORY"},
        {PI_ERR_CONTEXT_FULL, "PI_ERR_CONTEXT_FULL"},
        {PI_ERR_INTERNAL, "PI_ERR_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        CHECK(strcmp(pi_status_str(names[i].status), names[i].name) == 0);
    }
    CHECK(pi_status_str((pi_status)42) != NULL);

    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", PI_VERSION_MAJOR, PI_VERSION_MINOR,
             PI_VERSION_PATCH);
    CHECK(strcmp(pi_version(), version) == 0);
    CHECK(pi_system_info() != NULL && pi_system_info()[0] != '\0');
}

static void check_default_params(void) {
    CHECK(pi_model_default_params().struct_size == sizeof(pi_model_params));
    CHECK(pi_context_default_params().struct_size == sizeof(pi_context_params));
    CHECK(pi_sampler_default_params().struct_size == sizeof(pi_sampler_params));
    CHECK(pi_generate_default_params().struct_size == sizeof(pi_generate_params));
    CHECK(pi_synth_default_params().struct_size == sizeof(pi_synth_params));
}

static void check_bad_arguments(void) {
    static int sentinel;
    pi_model_params model_params = pi_model_default_params();
    pi_context_params context_params = pi_context_default_params();
    pi_generate_params generate_params = pi_generate_default_params();

    pi_model* model = (pi_model*)&sentinel;
    CHECK_INVALID(pi_model_load(NULL, &model_params, &model));
    CHECK(model == NULL);
    CHECK_INVALID(pi_model_load("model.gguf", &model_params, NULL));

    const char* missing = "/nonexistent/powerinfer-abi-test.gguf";
    model = (pi_model*)&sentinel;
    CHECK(pi_model_load(missing, &model_params, &model) == PI_ERR_IO);
    CHECK(model == NULL);
    CHECK(strstr(pi_last_error(), missing) != NULL);

    pi_context* ctx = (pi_context*)&sentinel;
    CHECK_INVALID(pi_context_create(NULL, &context_params, &ctx));
    CHECK(ctx == NULL);

    pi_token tokens[8];
    size_t n_tokens = 0;
    CHECK_INVALID(pi_tokenize(NULL, "hello", 5, 1, tokens, 8, &n_tokens));

    tokens[0] = 1;
    pi_batch batch = {1, tokens, NULL, NULL};
    CHECK_INVALID(pi_decode(NULL, &batch));
    CHECK_INVALID(pi_generate(NULL, "hello", &generate_params, NULL));

    pi_model_info info = {.struct_size = sizeof(pi_model_info)};
    CHECK_INVALID(pi_model_info_get(NULL, &info));

    float logits[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    pi_token token = 0;
    CHECK_INVALID(pi_sample(NULL, logits, 4, &token));

    CHECK(pi_token_bos(NULL) == -1);
    CHECK(pi_token_eos(NULL) == -1);

    pi_model_free(NULL);
    pi_context_free(NULL);
    pi_sampler_free(NULL);
    pi_context_cancel(NULL);
}

/* ---------------------------------------------------------------- with a model */

static pi_status generate(pi_context* ctx, text_buffer* buffer, pi_generate_result* result) {
    pi_generate_params params = pi_generate_default_params();
    params.max_tokens = 8;
    params.temperature = 0.0f;
    params.callback = collect;
    params.user_data = buffer;
    result->struct_size = sizeof *result;
    return pi_generate(ctx, "The quick brown fox", &params, result);
}

static void check_generation(const char* path) {
    pi_model_params model_params = pi_model_default_params();
    pi_model* model = NULL;
    pi_status status = pi_model_load(path, &model_params, &model);
    CHECK(status == PI_OK);
    if (status != PI_OK) return;

    CHECK(pi_n_vocab(model) > 0);
    size_t n_tokens = 0;
    const char* text = "Hello world";
    CHECK_INVALID(pi_tokenize(model, text, strlen(text), 1, NULL, 0, &n_tokens));
    CHECK(n_tokens >= 2);

    pi_context_params context_params = pi_context_default_params();
    context_params.n_ctx = 64;
    pi_context* ctx = NULL;
    CHECK(pi_context_create(model, &context_params, &ctx) == PI_OK);
    pi_context* other = NULL;
    CHECK(pi_context_create(model, &context_params, &other) == PI_OK);

    if (ctx && other) {
        static text_buffer first, again, elsewhere, stopped;
        pi_generate_result result = {.struct_size = sizeof(pi_generate_result)};
        CHECK(generate(ctx, &first, &result) == PI_OK);
        CHECK(result.n_prompt_tokens > 0);
        CHECK(result.n_generated_tokens > 0);
        CHECK(result.stop_reason == PI_STOP_EOS || result.stop_reason == PI_STOP_MAX_TOKENS);

        /* Greedy decoding is repeatable: on the same context and on a second one. */
        pi_generate_result result_again = {.struct_size = sizeof(pi_generate_result)};
        CHECK(generate(ctx, &again, &result_again) == PI_OK);
        CHECK(generate(other, &elsewhere, &result) == PI_OK);
        CHECK(result_again.n_generated_tokens == result.n_generated_tokens);
        CHECK(strcmp(first.text, again.text) == 0);
        CHECK(strcmp(first.text, elsewhere.text) == 0);

        if (first.len > 0) {
            stopped.stop_after_first = 1;
            CHECK(generate(ctx, &stopped, &result) == PI_STATUS_CANCELLED);
            CHECK(result.stop_reason == PI_STOP_CALLBACK);
        }
        printf("greedy continuation: \"%s\"\n", first.text);
    }
    pi_context_free(other);
    pi_context_free(ctx);
    pi_model_free(model);
}

int main(int argc, char** argv) {
    check_status_names();
    check_default_params();
    check_bad_arguments();
    if (argc > 1) check_generation(argv[1]);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
