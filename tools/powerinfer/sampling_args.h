/* The sampler chain's command-line flags, with llama.cpp's names and value syntax, read into a
 * pi_sampler_params together with the storage its pointers refer to. */
#ifndef PI_POWERINFER_SAMPLING_ARGS_H
#define PI_POWERINFER_SAMPLING_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "powerinfer.h"
#include "tool_args.h"

#define SAMPLING_MAX_STAGES 8

typedef struct sampling_args {
    pi_sampler_params params; /* what pi_generate_params.sampler_params points at */
    int64_t seed;             /* -s; < 0: a random seed */
    pi_logit_bias* logit_bias;
    size_t n_logit_bias;
    int32_t stages[SAMPLING_MAX_STAGES];
    char** breakers; /* --dry-sequence-breaker values with their escapes processed */
    size_t n_breakers;
    int breakers_given; /* 1 once any --dry-sequence-breaker replaced the default breakers */
    const char* grammar_file;
    const char* json_schema_file;
    const char* grammar_flag; /* which grammar flag was given, for the "only one" message */
    char* file_text;          /* the contents of grammar_file or json_schema_file */
} sampling_args;

/* The library's defaults. */
void sampling_args_init(sampling_args* s);

/* 1 when the current argument is a sampling flag: its value is read into s (a bad value is a
 * usage error on a). 0 when the argument is not one of them. */
int sampling_args_parse(tool_args* a, sampling_args* s);

/* After the command line: reads --grammar-file or --json-schema-file and completes s->params.
 * 0, or 1 after a message on stderr. */
int sampling_args_finish(sampling_args* s);

void sampling_args_free(sampling_args* s);

/* The --help lines of the sampling flags. */
extern const char sampling_args_usage[];

#endif
