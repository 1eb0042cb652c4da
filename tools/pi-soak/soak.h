/* pi-soak: long-running generation on one model through the public API only (docs/soak.md).
 * What the files share: the options, the run's state and the scenarios' entry points. */
#ifndef PI_SOAK_H
#define PI_SOAK_H

#include <stddef.h>
#include <stdint.h>

#include "powerinfer.h"
#include "tool_printf.h"

/* ------------------------------------------------------------------ options (options.c) */

typedef struct soak_options {
    const char* model;
    int64_t tokens;             /* token budget: cycles run until this many are generated */
    double seconds;             /* time budget; 0: none */
    uint64_t seed;              /* of the schedule and of every sampler */
    int threads;                /* pi_context_params.n_threads */
    int warmup_cycles;          /* cycles before the RSS baseline is taken (>= 1) */
    int64_t max_rss_growth_kib; /* allowed growth after the warm-up */
    int rss_check;              /* 0: --no-rss-check */
    int scenarios_per_cycle;    /* scenarios drawn in each cycle after the first */
    int recreate_every;         /* cycles between recreating contexts and samplers; 0: never */
    int reload_every;           /* cycles between reloading the model; 0: never */
    const char* tmp_dir;        /* NULL: a fresh folder under $TMPDIR (or /tmp) */
    int json;
    int progress; /* a line per cycle on stderr */
} soak_options;

/* 0 with *o filled, or 2 after a usage error on stderr (-h and --help exit). */
int soak_parse_options(int argc, char** argv, soak_options* o);

/* ------------------------------------------------------------------ memory (rss.c) */

/* The resident set size in KiB, or -1 when this platform offers no way to read it (the tool
 * then says so and skips the RSS check). */
int64_t soak_rss_kib(void);
/* "/proc/self/statm" or the reason the RSS is not measured. */
const char* soak_rss_source(void);
/* For --progress: the RSS's file-backed and anonymous parts and the C library's heap (bytes in
 * use, arena, mapped blocks) as " shared S anon A inuse U arena R mmap M" in KiB, with the
 * parts this platform does not tell left out; "" when it tells none. */
void soak_memory_detail(char* out, size_t cap);

/* ------------------------------------------------------------------ the run (main.c, scenarios.c)
 */

/* The geometry of the contexts: every scenario fits it, and context shifts happen in it. */
enum {
    SOAK_N_CTX = 256,
    SOAK_N_BATCH = 64,
    SOAK_N_SEQ = 4,
    SOAK_TRACE_CAP = 640, /* tokens one scenario's trace holds (the shift scenario's is longest) */
    SOAK_N_CHAINS = 8,    /* sampler chains (scenarios.c) */
    SOAK_N_PROMPTS = 4
};

/* The scenario kinds; each has a fixed set of variants with one reference trace each. */
typedef enum soak_kind {
    SOAK_GENERATE = 0, /* pi_generate from an empty cache, then a repeat, restore or move */
    SOAK_CHAT,         /* three turns over the growing transcript, cache reused */
    SOAK_SHIFT,        /* generation past n_ctx with context_shift */
    SOAK_PARALLEL,     /* several sequences in one batch, shared prefix, removals, keep */
    SOAK_STATE,        /* own decoding loop, saved state restored in memory and from a file */
    SOAK_N_KINDS
} soak_kind;

/* What scenarios report to the summary. */
typedef struct soak_counts {
    int64_t tokens; /* sampled tokens, every generation counted */
    int64_t scenarios;
    int64_t comparisons;  /* traces compared with their reference */
    int64_t references;   /* traces recorded */
    int64_t restores;     /* state loads whose continuation was compared */
    int64_t cache_reuses; /* pi_generate calls that kept a cached prefix */
    int64_t context_shifts;
    int64_t seq_edits;    /* pi_kv_seq_remove/copy/keep calls */
    int64_t grammar_runs; /* generations with a grammar */
    int64_t recreations;  /* contexts and samplers freed and made again */
    int64_t reloads;      /* model reloads */
    int64_t per_kind[SOAK_N_KINDS];
} soak_counts;

/* One variant's reference: the tokens of its first run. */
typedef struct soak_trace {
    int recorded;
    int n;
    pi_token tokens[SOAK_TRACE_CAP];
} soak_trace;

typedef struct soak_run {
    const soak_options* o;
    pi_model* model;
    pi_context* ctx; /* where the scenarios run */
    pi_context* aux; /* where saved states are restored into */
    /* The caller-owned chain of each sampler configuration, reset before each use. */
    pi_sampler* samplers[SOAK_N_CHAINS];
    int32_t n_vocab;
    pi_token eos;
    uint64_t rng; /* the schedule's generator (splitmix64) */
    int64_t cycle;
    char state_path[4096]; /* the temporary file of the saved states */
    /* Scratch reused by every scenario (allocated once, so the tool's own memory is flat). */
    pi_token* tokens;  /* prompt tokens, SOAK_N_CTX */
    soak_trace* trace; /* the current run's trace */
    soak_trace* again; /* a repetition's or a restore's trace */
    uint8_t* state;    /* a saved state in memory */
    size_t state_cap;
    uint8_t* sampler_state[SOAK_N_SEQ];
    size_t sampler_state_cap[SOAK_N_SEQ];
    char* text; /* a chat's transcript */
    size_t text_cap;
    /* The batch of the own decoding loops. */
    pi_token batch_tokens[SOAK_N_BATCH];
    pi_seq_id batch_seq[SOAK_N_BATCH];
    int8_t batch_logits[SOAK_N_BATCH];
    soak_trace* refs[SOAK_N_KINDS]; /* per kind, its variants' references */
    soak_counts counts;
    char failure[1024]; /* the first failure */
} soak_run;

/* The number of variants of a kind. */
int soak_variants(soak_kind kind);
const char* soak_kind_name(soak_kind kind);

/* Runs one scenario. mix is a random number that picks how it varies (which clearing call,
 * which sequence, which follow-up): its trace does not depend on it. 0 on success, else 1 with
 * run->failure set. */
int soak_scenario(soak_run* run, soak_kind kind, int variant, uint64_t mix);

/* (Re)creates run->ctx, run->aux and the samplers (freeing the old ones). 0 or 1 (failure). */
int soak_make_contexts(soak_run* run);
void soak_free_contexts(soak_run* run);

/* Records the first failure: printf-style, then pi_last_error() when status is an error.
 * Returns 1. */
TOOL_PRINTF(3, 4)
int soak_fail(soak_run* run, pi_status status, const char* format, ...);

#endif
