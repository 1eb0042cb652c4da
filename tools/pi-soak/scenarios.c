/* The scenarios of a soak cycle (docs/soak.md). Each is deterministic given its kind and variant:
 * its trace (the tokens it sampled) is compared with the variant's first run. The mix argument
 * only picks among equivalent ways of getting there (which clearing call, which sequence, which
 * sampler object, which follow-up), so every way must give the same tokens. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

/* ------------------------------------------------------------------ fixed material */

static const char* const prompts[SOAK_N_PROMPTS] = {
    "In the beginning God created the heaven and the earth.",
    "And the light shineth in darkness; and the darkness comprehended it not.",
    "The Lord is my shepherd; I shall not want.",
    "Blessed are the meek: for they shall inherit the earth.",
};

static const char system_text[] = "The words of the preacher, the son of David, king in Jerusalem.";

/* Two conversations of three user turns each. */
static const char* const chat_turns[2][3] = {
    {"Who made the light?", "And the waters?", "What came on the seventh day?"},
    {"Where is the garden?", "Who walked there in the cool of the day?", "And then?"},
};

/* The user messages of the parallel scenario's jobs. */
enum { parallel_jobs = 5 };
static const char* const job_texts[parallel_jobs] = {
    " Tell of the flood.",      " Tell of the ark and the dove.",
    " Who was the first king?", " Sing a psalm.",
    " What is vanity?",
};

/* Only lowercase letters and spaces, then a full stop: checked on the text of pi_generate. */
static const char grammar_text[] = "root ::= [a-z ]{8,300} \".\"\n";
static const char grammar_chars[] = "abcdefghijklmnopqrstuvwxyz .";

/* Chain 6's stage order. */
static const int32_t custom_stages[] = {PI_SAMPLER_STAGE_TOP_K, PI_SAMPLER_STAGE_PENALTIES,
                                        PI_SAMPLER_STAGE_MIN_P, PI_SAMPLER_STAGE_TEMPERATURE};
static pi_logit_bias chain_bias[2]; /* set from the model's EOS by chain_params */

enum { grammar_chain = 5 };

static uint32_t chain_seed(uint64_t seed, int chain) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(chain + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    const uint32_t s = (uint32_t)(z ^ (z >> 31));
    return s == PI_SEED_RANDOM ? 7u : s;
}

/* The sampler configurations: every stage, both mirostats, a grammar, a logit bias and a custom
 * stage order, each with its own fixed seed. */
static void chain_params(const soak_run* run, int chain, pi_sampler_params* p) {
    *p = pi_sampler_default_params();
    p->seed = chain_seed(run->o->seed, chain);
    switch (chain) {
    case 0: /* greedy */
        p->temperature = 0.0f;
        break;
    case 1: /* llama.cpp's defaults */
        break;
    case 2:
        p->temperature = 1.1f;
        p->top_k = 0;
        p->top_p = 0.9f;
        p->typical_p = 0.95f;
        p->penalty_last_n = 32;
        p->repeat_penalty = 1.15f;
        p->frequency_penalty = 0.2f;
        p->presence_penalty = 0.3f;
        break;
    case 3:
        p->temperature = 0.9f;
        p->mirostat = 2;
        p->mirostat_tau = 4.0f;
        p->mirostat_eta = 0.15f;
        break;
    case 4:
        p->min_p = 0.02f;
        p->dry_multiplier = 0.8f;
        p->dry_allowed_length = 2;
        p->dry_penalty_last_n = 64;
        p->xtc_probability = 0.5f;
        p->xtc_threshold = 0.1f;
        p->dynatemp_range = 0.4f;
        p->dynatemp_exponent = 1.3f;
        break;
    case grammar_chain:
        p->temperature = 0.9f;
        p->grammar = grammar_text;
        break;
    case 6: /* the end of text is banned, so this chain runs into context shifts */
        chain_bias[0].token = run->eos;
        chain_bias[0].bias = -INFINITY;
        chain_bias[1].token = 5 % run->n_vocab;
        chain_bias[1].bias = 2.0f;
        p->logit_bias = chain_bias;
        p->n_logit_bias = run->eos >= 0 ? 2 : 1;
        if (run->eos < 0) p->logit_bias = chain_bias + 1;
        p->stages = custom_stages;
        p->n_stages = sizeof custom_stages / sizeof custom_stages[0];
        p->top_k = 20;
        p->temperature = 1.0f;
        p->min_keep = 3;
        p->penalty_last_n = 16;
        p->repeat_penalty = 1.1f;
        break;
    default: /* 7 */
        p->temperature = 0.8f;
        p->mirostat = 1;
        break;
    }
}

/* ------------------------------------------------------------------ failures and checks */

int soak_fail(soak_run* run, pi_status status, const char* format, ...) {
    if (run->failure[0]) return 1;
    va_list args;
    va_start(args, format);
    vsnprintf(run->failure, sizeof run->failure, format, args);
    va_end(args);
    if (status < 0) {
        const size_t used = strlen(run->failure);
        snprintf(run->failure + used, sizeof run->failure - used, ": %s: %s", pi_status_str(status),
                 pi_last_error());
    }
    return 1;
}

/* Every library call goes through this: a failure records where and why. */
#define CALL(run, call, what)                                                                      \
    do {                                                                                           \
        const pi_status status_ = (call);                                                          \
        if (status_ != PI_OK) return soak_fail((run), status_, "%s", (what));                      \
    } while (0)

#define REQUIRE(run, cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) return soak_fail((run), PI_OK, __VA_ARGS__);                                  \
    } while (0)

static const char* const kind_names[SOAK_N_KINDS] = {"generate", "chat", "shift", "parallel",
                                                     "state"};

const char* soak_kind_name(soak_kind kind) {
    return kind_names[kind];
}

static const int chat_chains[] = {1, 2, 4, 7};
static const int shift_chains[SOAK_N_PROMPTS] = {6, 1, 6, 4};
static const int shift_keep[SOAK_N_PROMPTS] = {1, 4, 8, 1};
static const int parallel_chains[2][3] = {{1, 3, 7}, {2, 4, grammar_chain}};
static const int state_chains[] = {grammar_chain, 3, 4};

int soak_variants(soak_kind kind) {
    switch (kind) {
    case SOAK_GENERATE:
        return SOAK_N_PROMPTS * SOAK_N_CHAINS;
    case SOAK_CHAT:
        return 2 * (int)(sizeof chat_chains / sizeof chat_chains[0]);
    case SOAK_SHIFT:
        return SOAK_N_PROMPTS;
    case SOAK_PARALLEL:
        return 2;
    default:
        return SOAK_N_PROMPTS * (int)(sizeof state_chains / sizeof state_chains[0]);
    }
}

static void trace_clear(soak_trace* t) {
    t->n = 0;
}

static int trace_push(soak_run* run, soak_trace* t, pi_token token) {
    REQUIRE(run, t->n < SOAK_TRACE_CAP, "the trace outgrew its %d tokens", SOAK_TRACE_CAP);
    t->tokens[t->n++] = token;
    return 0;
}

/* got (from index from on) must equal want (from the same index): what differs, named. */
static int same_tokens(soak_run* run, const soak_trace* want, const soak_trace* got, int from,
                       const char* what) {
    const int n = want->n < got->n ? want->n : got->n;
    for (int i = from; i < n; ++i)
        REQUIRE(run, want->tokens[i] == got->tokens[i],
                "%s: token %d is %d, expected %d (of %d tokens)", what, i, (int)got->tokens[i],
                (int)want->tokens[i], want->n);
    REQUIRE(run, want->n == got->n, "%s: %d tokens, expected %d", what, got->n, want->n);
    return 0;
}

/* The trace of a variant's run: recorded on its first run, compared on every later one. */
static int check_reference(soak_run* run, soak_kind kind, int variant, const soak_trace* t,
                           const char* what) {
    soak_trace* ref = &run->refs[kind][variant];
    if (!ref->recorded) {
        memcpy(ref->tokens, t->tokens, sizeof(pi_token) * (size_t)t->n);
        ref->n = t->n;
        ref->recorded = 1;
        ++run->counts.references;
        return 0;
    }
    ++run->counts.comparisons;
    return same_tokens(run, ref, t, 0, what);
}

/* ------------------------------------------------------------------ contexts and samplers */

static pi_status make_context(soak_run* run, pi_context** out) {
    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = SOAK_N_CTX;
    cp.n_batch = SOAK_N_BATCH;
    cp.n_threads = run->o->threads;
    cp.n_seq_max = SOAK_N_SEQ;
    cp.seed = chain_seed(run->o->seed, -1);
    return pi_context_create(run->model, &cp, out);
}

static pi_status make_sampler(soak_run* run, int chain, pi_sampler** out) {
    pi_sampler_params p;
    chain_params(run, chain, &p);
    return pi_sampler_create_for_model(run->model, &p, out);
}

void soak_free_contexts(soak_run* run) {
    for (int c = 0; c < SOAK_N_CHAINS; ++c) {
        pi_sampler_free(run->samplers[c]);
        run->samplers[c] = NULL;
    }
    pi_context_free(run->aux);
    pi_context_free(run->ctx);
    run->aux = run->ctx = NULL;
}

int soak_make_contexts(soak_run* run) {
    soak_free_contexts(run);
    run->n_vocab = pi_n_vocab(run->model);
    run->eos = pi_token_eos(run->model);
    REQUIRE(run, run->n_vocab > 0, "the model has no vocabulary");
    CALL(run, make_context(run, &run->ctx), "pi_context_create");
    CALL(run, make_context(run, &run->aux), "pi_context_create (the restore target)");
    for (int c = 0; c < SOAK_N_CHAINS; ++c)
        CALL(run, make_sampler(run, c, &run->samplers[c]), "pi_sampler_create_for_model");
    return 0;
}

/* Empties the whole cache, by one of the two calls that do it. */
static int clear(soak_run* run, pi_context* ctx, uint64_t mix) {
    if (mix & 1)
        CALL(run, pi_kv_truncate(ctx, 0), "pi_kv_truncate");
    else
        CALL(run, pi_kv_seq_remove(ctx, -1, -1, -1), "pi_kv_seq_remove (every sequence)");
    ++run->counts.seq_edits;
    REQUIRE(run, pi_kv_n_used_cells(ctx) == 0, "a cleared cache still uses %d cells",
            (int)pi_kv_n_used_cells(ctx));
    for (pi_seq_id s = 0; s < SOAK_N_SEQ; ++s)
        REQUIRE(run, pi_kv_seq_pos_max(ctx, s) == -1, "a cleared sequence %d still ends at %d",
                (int)s, (int)pi_kv_seq_pos_max(ctx, s));
    return 0;
}

static int tokenize(soak_run* run, const char* text, int add_bos, size_t* n) {
    CALL(run, pi_tokenize(run->model, text, strlen(text), add_bos, run->tokens, SOAK_N_CTX, n),
         "pi_tokenize");
    REQUIRE(run, *n > 0, "'%s' has no tokens", text);
    return 0;
}

/* ------------------------------------------------------------------ pi_generate */

typedef struct collector {
    soak_trace* trace;
    int overflow;
    char* text; /* NULL: the text is not kept */
    size_t len, cap;
} collector;

static int collect_token(const pi_token_event* e, void* user_data) {
    collector* c = user_data;
    if (c->trace->n >= SOAK_TRACE_CAP) {
        c->overflow = 1;
        return 0;
    }
    c->trace->tokens[c->trace->n++] = e->token;
    return 1;
}

static int collect_text(const char* text, size_t len, void* user_data) {
    collector* c = user_data;
    if (!c->text) return 1;
    if (c->len + len + 1 > c->cap) {
        c->overflow = 1;
        return 0;
    }
    memcpy(c->text + c->len, text, len);
    c->len += len;
    c->text[c->len] = '\0';
    return 1;
}

/* How pi_generate gets its sampler; all give the same tokens. */
typedef enum sampler_mode {
    BY_PARAMS = 0, /* sampler_params: the library makes one for the call */
    PERSISTENT,    /* the chain's own sampler, reset, the cached prompt tokens accepted */
    FRESH,         /* a sampler made for this call and freed after it */
    N_MODES,
    AS_IS /* the given sampler as it is (a chat's, across turns) */
} sampler_mode;

typedef struct gen_request {
    pi_context* ctx;
    const char* prompt;
    int chain;
    sampler_mode mode;
    pi_sampler* sampler; /* AS_IS */
    pi_seq_id seq;
    int max_tokens;
    int context_shift, n_keep;
    int expect_cached; /* the n_cached_tokens pi_generate must report; -1: not checked */
    soak_trace* trace; /* the generated tokens are appended */
    char* text;        /* NULL, or the text is appended here (text_len bytes used) */
    size_t* text_len;
} gen_request;

/* A caller's sampler sees only the prompt tokens pi_generate decodes: the cached ones are
 * accepted here first, as the sampler the library makes for a call would see them. */
static int accept_cached(soak_run* run, pi_sampler* smp, const char* prompt, int n_cached) {
    if (n_cached <= 0) return 0;
    size_t n = 0;
    if (tokenize(run, prompt, 1, &n)) return 1;
    for (size_t i = 0; i < (size_t)n_cached && i < n; ++i)
        CALL(run, pi_sampler_accept(smp, run->tokens[i]), "pi_sampler_accept");
    return 0;
}

static int generate_with(soak_run* run, const gen_request* g, pi_generate_params* gp,
                         pi_generate_result* r) {
    collector c = {g->trace, 0, g->text, g->text_len ? *g->text_len : 0, run->text_cap};
    gp->on_token = collect_token;
    gp->callback = collect_text;
    gp->user_data = &c;
    const int before = g->trace->n;
    *r = (pi_generate_result){0};
    r->struct_size = sizeof *r;
    const pi_status s = pi_generate(g->ctx, g->prompt, gp, r);
    if (g->text_len) *g->text_len = c.len;
    REQUIRE(run, !c.overflow, "pi_generate: the collected tokens or text outgrew the buffers");
    CALL(run, s, "pi_generate");
    REQUIRE(run, r->n_generated_tokens == g->trace->n - before,
            "pi_generate reports %d generated tokens, its events %d", r->n_generated_tokens,
            g->trace->n - before);
    REQUIRE(run, r->stop_reason == PI_STOP_EOS || r->stop_reason == PI_STOP_MAX_TOKENS,
            "pi_generate stopped for reason %d", r->stop_reason);
    REQUIRE(run, g->expect_cached < 0 || r->n_cached_tokens == g->expect_cached,
            "pi_generate reused %d cached tokens, expected %d", r->n_cached_tokens,
            g->expect_cached);
    run->counts.tokens += r->n_generated_tokens;
    run->counts.context_shifts += r->n_context_shifts;
    if (r->n_cached_tokens > 0) ++run->counts.cache_reuses;
    if (g->chain == grammar_chain) ++run->counts.grammar_runs;
    return 0;
}

static int generate(soak_run* run, const gen_request* g, pi_generate_result* r) {
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = g->max_tokens;
    gp.seq_id = g->seq;
    gp.context_shift = g->context_shift;
    gp.n_keep = g->n_keep;
    pi_sampler_params sp;
    switch (g->mode) {
    case BY_PARAMS:
        chain_params(run, g->chain, &sp);
        gp.sampler_params = &sp;
        return generate_with(run, g, &gp, r);
    case AS_IS:
        gp.sampler = g->sampler;
        return generate_with(run, g, &gp, r);
    case PERSISTENT:
        REQUIRE(run, g->expect_cached >= 0, "a caller's sampler needs the cached count");
        gp.sampler = run->samplers[g->chain];
        pi_sampler_reset(gp.sampler);
        if (accept_cached(run, gp.sampler, g->prompt, g->expect_cached)) return 1;
        return generate_with(run, g, &gp, r);
    default: {
        REQUIRE(run, g->expect_cached >= 0, "a caller's sampler needs the cached count");
        pi_sampler* fresh = NULL;
        CALL(run, make_sampler(run, g->chain, &fresh), "pi_sampler_create_for_model");
        gp.sampler = fresh;
        const int failed =
            accept_cached(run, fresh, g->prompt, g->expect_cached) || generate_with(run, g, &gp, r);
        pi_sampler_free(fresh);
        return failed;
    }
    }
}

/* ------------------------------------------------------------------ own decoding loops */

/* Decodes n tokens into seq in batches of at most SOAK_N_BATCH (each sequence's last token of a
 * batch gets logits). */
static int decode_tokens(soak_run* run, pi_context* ctx, const pi_token* tokens, size_t n,
                         pi_seq_id seq) {
    for (size_t at = 0; at < n; at += SOAK_N_BATCH) {
        const size_t k = n - at < SOAK_N_BATCH ? n - at : SOAK_N_BATCH;
        for (size_t i = 0; i < k; ++i)
            run->batch_seq[i] = seq;
        pi_seq_batch b = {sizeof b, (int32_t)k, tokens + at, NULL, run->batch_seq, NULL};
        CALL(run, pi_context_decode(ctx, &b), "pi_context_decode");
    }
    return 0;
}

/* Samples up to n tokens from seq's last logits, decoding each; *ended = 1 at an end of text. */
static int sample_tokens(soak_run* run, pi_context* ctx, pi_sampler* smp, pi_seq_id seq, int n,
                         soak_trace* out, int* ended) {
    *ended = 0;
    for (int i = 0; i < n; ++i) {
        const float* logits = pi_get_logits(ctx, -1);
        REQUIRE(run, logits, "pi_get_logits: no logits after a decode");
        pi_token t = -1;
        CALL(run, pi_sample(smp, logits, run->n_vocab, &t), "pi_sample");
        ++run->counts.tokens;
        if (pi_token_is_eog(run->model, t)) {
            *ended = 1;
            return 0;
        }
        if (trace_push(run, out, t)) return 1;
        if (decode_tokens(run, ctx, &t, 1, seq)) return 1;
    }
    return 0;
}

/* Makes run->state hold a saved state of ctx (seq, with smp when not NULL). */
static int save_state(soak_run* run, pi_context* ctx, pi_seq_id seq, const pi_sampler* smp,
                      size_t* len) {
    CALL(run, pi_context_state_save(ctx, seq, smp, NULL, 0, len), "pi_context_state_save (size)");
    if (*len > run->state_cap) {
        uint8_t* bigger = realloc(run->state, *len);
        REQUIRE(run, bigger, "cannot hold a saved state of %llu bytes", (unsigned long long)*len);
        memset(bigger, 0, *len); /* resident now, not when a later save first writes it */
        run->state = bigger;
        run->state_cap = *len;
    }
    size_t written = 0;
    CALL(run, pi_context_state_save(ctx, seq, smp, run->state, run->state_cap, &written),
         "pi_context_state_save");
    REQUIRE(run, written == *len, "pi_context_state_save wrote %zu bytes, announced %zu", written,
            *len);
    return 0;
}

/* ------------------------------------------------------------------ the kinds */

/* pi_generate from an empty cache, then one follow-up that must give the same tokens: a repeat
 * over the cached prompt, a restore in memory after other work, or a move to another context and
 * sequence through a state file. */
static int scenario_generate(soak_run* run, int variant, uint64_t mix) {
    const int prompt = variant % SOAK_N_PROMPTS, chain = variant / SOAK_N_PROMPTS;
    const pi_seq_id seq = (pi_seq_id)((mix >> 1) % SOAK_N_SEQ);
    const int max_tokens = 32 + 8 * (variant % 4);
    if (clear(run, run->ctx, mix)) return 1;
    soak_trace* t = run->trace;
    trace_clear(t);
    size_t text_len = 0;
    run->text[0] = '\0';
    gen_request g = {run->ctx,   prompts[prompt],
                     chain,      (sampler_mode)((mix >> 3) % N_MODES),
                     NULL,       seq,
                     max_tokens, 0,
                     1,          0,
                     t,          run->text,
                     &text_len};
    pi_generate_result r;
    if (generate(run, &g, &r)) return 1;
    if (check_reference(run, SOAK_GENERATE, variant, t, "pi_generate")) return 1;
    if (chain == grammar_chain) {
        for (size_t i = 0; i < text_len; ++i)
            REQUIRE(run, strchr(grammar_chars, run->text[i]) && run->text[i],
                    "the grammar allows only [a-z .], the text is '%s'", run->text);
        if (r.stop_reason == PI_STOP_EOS)
            REQUIRE(run, text_len > 0 && run->text[text_len - 1] == '.',
                    "a complete grammar match ends with '.', the text is '%s'", run->text);
    }

    const int n_prompt = r.n_prompt_tokens;
    gen_request again = g;
    again.trace = run->again;
    again.text = NULL;
    again.text_len = NULL;
    again.expect_cached = n_prompt - 1;
    again.mode = (sampler_mode)((mix >> 5) % N_MODES);
    size_t len = 0;
    switch ((mix >> 7) % 4) {
    case 0:
        return 0;
    case 1: /* the same request again: the cache holds the prompt */
        break;
    case 2: { /* saved, overwritten by another generation, restored */
        if (save_state(run, run->ctx, seq, NULL, &len)) return 1;
        if (clear(run, run->ctx, mix >> 9)) return 1;
        const int other = (prompt + 1) % SOAK_N_PROMPTS + chain * SOAK_N_PROMPTS;
        trace_clear(run->again);
        gen_request o = {run->ctx,
                         prompts[other % SOAK_N_PROMPTS],
                         chain,
                         BY_PARAMS,
                         NULL,
                         seq,
                         32 + 8 * (other % 4),
                         0,
                         1,
                         0,
                         run->again,
                         NULL,
                         NULL};
        if (generate(run, &o, &r)) return 1;
        if (check_reference(run, SOAK_GENERATE, other, run->again, "pi_generate (another)"))
            return 1;
        CALL(run, pi_context_state_load(run->ctx, seq, NULL, run->state, len),
             "pi_context_state_load");
        ++run->counts.restores;
        break;
    }
    default: /* to another context and sequence through a file */
        CALL(run, pi_context_state_save_file(run->ctx, seq, NULL, run->state_path),
             "pi_context_state_save_file");
        if (clear(run, run->aux, mix >> 9)) return 1;
        again.ctx = run->aux;
        again.seq = (seq + 1 + (pi_seq_id)((mix >> 10) % (SOAK_N_SEQ - 1))) % SOAK_N_SEQ;
        CALL(run, pi_context_state_load_file(run->aux, again.seq, NULL, run->state_path),
             "pi_context_state_load_file");
        ++run->counts.restores;
        break;
    }
    trace_clear(run->again);
    if (generate(run, &again, &r)) return 1;
    return same_tokens(run, t, run->again, 0, "pi_generate over the cached prompt");
}

/* Three chat turns, each over the whole transcript with the cache reused, one sampler across
 * them; the conversation may move to the other context (with its sampler's state) between turns. */
static int scenario_chat(soak_run* run, int variant, uint64_t mix) {
    const int conversation = variant % 2, chain = chat_chains[variant / 2];
    pi_seq_id seq = (pi_seq_id)((mix >> 1) % SOAK_N_SEQ);
    const int move_after = (int)((mix >> 3) % 3); /* 0: stays; 1, 2: moves after that turn */
    pi_context* ctx = run->ctx;
    pi_sampler* smp = run->samplers[chain];
    pi_sampler* moved = NULL;
    pi_sampler_reset(smp);
    if (clear(run, ctx, mix)) return 1;
    soak_trace* t = run->trace;
    trace_clear(t);
    size_t len = (size_t)snprintf(run->text, run->text_cap, "%s", system_text);
    int previous_prompt = 0;
    for (int turn = 0; turn < 3; ++turn) {
        const size_t room = run->text_cap - len;
        const int n = snprintf(run->text + len, room,
                               "\nUser: %s\nAssistant:", chat_turns[conversation][turn]);
        if (n < 0 || (size_t)n >= room) {
            soak_fail(run, PI_OK, "the transcript outgrew its %zu bytes", run->text_cap);
            break;
        }
        len += (size_t)n;
        gen_request g = {ctx, run->text, chain, AS_IS, smp, seq, 24, 0, 1, -1, t, run->text, &len};
        pi_generate_result r;
        if (generate(run, &g, &r)) break;
        if (turn > 0 && r.n_cached_tokens < previous_prompt - 8) {
            soak_fail(run, PI_OK, "turn %d reused %d cached tokens of the %d of the last prompt",
                      turn + 1, r.n_cached_tokens, previous_prompt);
            break;
        }
        previous_prompt = r.n_prompt_tokens;
        if (trace_push(run, t, -1)) break;
        if (turn + 1 == move_after) {
            /* Saved with the sampler; restored into a new sampler of the same chain in the other
             * context, one sequence (memory) or the whole context (file). */
            const pi_status made = make_sampler(run, chain, &moved);
            if (made != PI_OK) {
                soak_fail(run, made, "pi_sampler_create_for_model");
                break;
            }
            if (clear(run, run->aux, mix >> 5)) break;
            pi_status s;
            const char* what;
            if (mix & (1u << 6)) {
                size_t size = 0;
                if (save_state(run, ctx, seq, smp, &size)) break;
                seq = (seq + 1) % SOAK_N_SEQ;
                s = pi_context_state_load(run->aux, seq, moved, run->state, size);
                what = "pi_context_state_load (a chat's sequence and sampler)";
            } else {
                s = pi_context_state_save_file(ctx, -1, smp, run->state_path);
                if (s != PI_OK) {
                    soak_fail(run, s, "pi_context_state_save_file (a chat)");
                    break;
                }
                s = pi_context_state_load_file(run->aux, -1, moved, run->state_path);
                what = "pi_context_state_load_file (a chat and its sampler)";
            }
            if (s != PI_OK) {
                soak_fail(run, s, "%s", what);
                break;
            }
            ++run->counts.restores;
            ctx = run->aux;
            smp = moved;
        }
    }
    pi_sampler_free(moved);
    if (run->failure[0]) return 1;
    return check_reference(run, SOAK_CHAT, variant, t, "the chat");
}

/* A generation longer than the context, going on through context shifts. */
static int scenario_shift(soak_run* run, int variant, uint64_t mix) {
    const pi_seq_id seq = (pi_seq_id)((mix >> 1) % SOAK_N_SEQ);
    const int max_tokens = SOAK_N_CTX + 64 + 16 * variant;
    if (clear(run, run->ctx, mix)) return 1;
    soak_trace* t = run->trace;
    trace_clear(t);
    gen_request g = {run->ctx,
                     prompts[variant],
                     shift_chains[variant],
                     (sampler_mode)((mix >> 3) % N_MODES),
                     NULL,
                     seq,
                     max_tokens,
                     1,
                     shift_keep[variant],
                     0,
                     t,
                     NULL,
                     NULL};
    pi_generate_result r;
    if (generate(run, &g, &r)) return 1;
    if (r.n_prompt_tokens + r.n_generated_tokens > SOAK_N_CTX)
        REQUIRE(run, r.n_context_shifts > 0, "%d tokens in a context of %d without a shift",
                r.n_prompt_tokens + r.n_generated_tokens, SOAK_N_CTX);
    REQUIRE(run, pi_kv_seq_pos_max(run->ctx, seq) < SOAK_N_CTX,
            "sequence %d ends at position %d, past n_ctx", (int)seq,
            (int)pi_kv_seq_pos_max(run->ctx, seq));
    return check_reference(run, SOAK_SHIFT, variant, t, "generation with context shifts");
}

/* One slot of the parallel scenario: a sequence serving one job at a time. */
typedef struct slot {
    int job;     /* -1: idle */
    int left;    /* tokens still to sample */
    int pending; /* 1: the job's message is still to be decoded */
    pi_token last;
    pi_sampler* smp;
} slot;

static void free_slots(slot* slots, int n) {
    for (int s = 0; s < n; ++s) {
        pi_sampler_free(slots[s].smp);
        slots[s].smp = NULL;
    }
}

static int run_parallel(soak_run* run, int variant, uint64_t mix, slot* slots) {
    pi_context* ctx = run->ctx;
    const int n_slots = SOAK_N_SEQ - 1; /* sequence 0 holds the shared prefix */
    if (clear(run, ctx, mix)) return 1;
    size_t n_prefix = 0;
    if (tokenize(run, system_text, 1, &n_prefix)) return 1;
    if (decode_tokens(run, ctx, run->tokens, n_prefix, 0)) return 1;
    soak_trace* t = run->trace;
    trace_clear(t);
    int next_job = 0, active = 0;
    const int checkpoint = 3 + (int)((mix >> 1) % 12); /* the step whose state is restored */
    for (int step = 0;; ++step) {
        /* Idle slots take the next job: the shared prefix, then the job's message. */
        for (int s = 0; s < n_slots && next_job < parallel_jobs; ++s) {
            if (slots[s].job >= 0) continue;
            const pi_seq_id seq = (pi_seq_id)(s + 1);
            CALL(run, pi_kv_seq_copy(ctx, 0, seq, -1, -1), "pi_kv_seq_copy (the shared prefix)");
            ++run->counts.seq_edits;
            REQUIRE(run, pi_kv_seq_pos_max(ctx, seq) == (int32_t)n_prefix - 1,
                    "a copied prefix ends at %d, expected %d", (int)pi_kv_seq_pos_max(ctx, seq),
                    (int)n_prefix - 1);
            const int chain = parallel_chains[variant][next_job % 3];
            CALL(run, make_sampler(run, chain, &slots[s].smp), "pi_sampler_create_for_model");
            slots[s].job = next_job;
            slots[s].left = 12 + 6 * next_job;
            slots[s].pending = 1;
            ++next_job;
            ++active;
        }
        if (active == 0) break;
        /* One batch: a pending job's message, or each running job's last token. */
        int n = 0, last_of[SOAK_N_SEQ];
        for (int s = 0; s < n_slots; ++s) {
            last_of[s] = -1;
            if (slots[s].job < 0) continue;
            if (slots[s].pending) {
                size_t k = 0;
                if (tokenize(run, job_texts[slots[s].job], 0, &k)) return 1;
                REQUIRE(run, n + (int)k <= SOAK_N_BATCH, "a batch outgrew %d tokens", SOAK_N_BATCH);
                for (size_t i = 0; i < k; ++i) {
                    run->batch_tokens[n] = run->tokens[i];
                    run->batch_seq[n] = (pi_seq_id)(s + 1);
                    run->batch_logits[n++] = 0;
                    CALL(run, pi_sampler_accept(slots[s].smp, run->tokens[i]), "pi_sampler_accept");
                }
                slots[s].pending = 0;
            } else {
                REQUIRE(run, n < SOAK_N_BATCH, "a batch outgrew %d tokens", SOAK_N_BATCH);
                run->batch_tokens[n] = slots[s].last;
                run->batch_seq[n] = (pi_seq_id)(s + 1);
                run->batch_logits[n++] = 0;
            }
            run->batch_logits[n - 1] = 1;
            last_of[s] = n - 1;
        }
        pi_seq_batch b = {sizeof b, n, run->batch_tokens, NULL, run->batch_seq, run->batch_logits};
        CALL(run, pi_context_decode(ctx, &b), "pi_context_decode (several sequences)");
        /* Each job samples from its own logits; a finished one frees its sequence. */
        for (int s = 0; s < n_slots; ++s) {
            if (last_of[s] < 0) continue;
            const float* logits = pi_get_logits(ctx, last_of[s]);
            REQUIRE(run, logits, "pi_get_logits(%d): none for sequence %d", last_of[s], s + 1);
            pi_token tok = -1;
            CALL(run, pi_sample(slots[s].smp, logits, run->n_vocab, &tok), "pi_sample");
            ++run->counts.tokens;
            const int ended = pi_token_is_eog(run->model, tok);
            if (!ended && trace_push(run, t, tok)) return 1;
            slots[s].last = tok;
            if (ended || --slots[s].left == 0) {
                if (trace_push(run, t, -1 - slots[s].job)) return 1;
                const pi_seq_id seq = (pi_seq_id)(s + 1);
                if (active == 1 && next_job == parallel_jobs)
                    CALL(run, pi_kv_seq_keep(ctx, 0), "pi_kv_seq_keep");
                else
                    CALL(run, pi_kv_seq_remove(ctx, seq, -1, -1), "pi_kv_seq_remove");
                ++run->counts.seq_edits;
                REQUIRE(run, pi_kv_seq_pos_max(ctx, seq) == -1,
                        "a removed sequence %d still ends at %d", (int)seq,
                        (int)pi_kv_seq_pos_max(ctx, seq));
                pi_sampler_free(slots[s].smp);
                slots[s].smp = NULL;
                slots[s].job = -1;
                --active;
            }
        }
        /* Cells: the shared prefix once, plus each running job's own tokens. */
        int32_t expected = (int32_t)n_prefix;
        for (int s = 0; s < n_slots; ++s)
            if (slots[s].job >= 0)
                expected += pi_kv_seq_pos_max(ctx, s + 1) + 1 - (int32_t)n_prefix;
        REQUIRE(run, pi_kv_n_used_cells(ctx) == expected, "%d cells in use, expected %d",
                (int)pi_kv_n_used_cells(ctx), (int)expected);
        if (step == checkpoint) {
            /* Every sequence and every job's sampler saved, the context and samplers disturbed,
             * then everything restored: the jobs must go on as if nothing happened. */
            size_t len = 0;
            if (save_state(run, ctx, -1, NULL, &len)) return 1;
            size_t sizes[SOAK_N_SEQ] = {0};
            for (int s = 0; s < n_slots; ++s) {
                if (!slots[s].smp) continue;
                size_t need = 0;
                CALL(run, pi_sampler_state_save(slots[s].smp, NULL, 0, &need),
                     "pi_sampler_state_save (size)");
                if (need > run->sampler_state_cap[s]) {
                    uint8_t* bigger = realloc(run->sampler_state[s], need);
                    REQUIRE(run, bigger, "cannot hold a sampler state of %zu bytes", need);
                    memset(bigger, 0, need);
                    run->sampler_state[s] = bigger;
                    run->sampler_state_cap[s] = need;
                }
                CALL(run,
                     pi_sampler_state_save(slots[s].smp, run->sampler_state[s],
                                           run->sampler_state_cap[s], &sizes[s]),
                     "pi_sampler_state_save");
                pi_sampler_reset(slots[s].smp);
            }
            const int32_t cells = pi_kv_n_used_cells(ctx);
            if (clear(run, ctx, mix >> 5)) return 1;
            CALL(run, pi_context_state_load(ctx, -1, NULL, run->state, len),
                 "pi_context_state_load (several sequences)");
            for (int s = 0; s < n_slots; ++s)
                if (slots[s].smp)
                    CALL(run, pi_sampler_state_load(slots[s].smp, run->sampler_state[s], sizes[s]),
                         "pi_sampler_state_load");
            REQUIRE(run, pi_kv_n_used_cells(ctx) == cells,
                    "a restored cache uses %d cells, saved with %d", (int)pi_kv_n_used_cells(ctx),
                    (int)cells);
            ++run->counts.restores;
        }
    }
    REQUIRE(run, pi_kv_n_used_cells(ctx) == (int32_t)n_prefix,
            "after every job %d cells are in use, expected the prefix's %d",
            (int)pi_kv_n_used_cells(ctx), (int)n_prefix);
    return check_reference(run, SOAK_PARALLEL, variant, t, "the parallel jobs");
}

static int scenario_parallel(soak_run* run, int variant, uint64_t mix) {
    slot slots[SOAK_N_SEQ - 1];
    for (int s = 0; s < SOAK_N_SEQ - 1; ++s)
        slots[s] = (slot){-1, 0, 0, 0, NULL};
    const int failed = run_parallel(run, variant, mix, slots);
    free_slots(slots, SOAK_N_SEQ - 1);
    return failed;
}

/* An own decoding loop saved halfway, with its sampler; it goes on uninterrupted, then from the
 * state restored in memory and from the state file in the other (or a new) context. */
static int run_state(soak_run* run, int variant, uint64_t mix, pi_context** made,
                     pi_sampler** other) {
    const int prompt = variant % SOAK_N_PROMPTS, chain = state_chains[variant / SOAK_N_PROMPTS];
    const pi_seq_id seq = (pi_seq_id)((mix >> 1) % SOAK_N_SEQ);
    enum { before = 20, after = 20 };
    pi_context* ctx = run->ctx;
    pi_sampler* smp = run->samplers[chain];
    if (clear(run, ctx, mix)) return 1;
    pi_sampler_reset(smp);
    size_t n = 0;
    if (tokenize(run, prompts[prompt], 1, &n)) return 1;
    for (size_t i = 0; i < n; ++i)
        CALL(run, pi_sampler_accept(smp, run->tokens[i]), "pi_sampler_accept");
    pi_token last = run->tokens[n - 1];
    if (decode_tokens(run, ctx, run->tokens, n, seq)) return 1;
    soak_trace* t = run->trace;
    trace_clear(t);
    int ended = 0;
    if (sample_tokens(run, ctx, smp, seq, before, t, &ended)) return 1;
    if (ended) return check_reference(run, SOAK_STATE, variant, t, "the decoding loop");
    if (t->n > 0) last = t->tokens[t->n - 1];
    const int saved_at = t->n;
    const int32_t n_past = pi_kv_seq_pos_max(ctx, seq) + 1;
    size_t len = 0;
    if (save_state(run, ctx, -1, smp, &len)) return 1;
    CALL(run, pi_context_state_save_file(ctx, seq, smp, run->state_path),
         "pi_context_state_save_file");
    if (sample_tokens(run, ctx, smp, seq, after, t, &ended)) return 1;
    if (check_reference(run, SOAK_STATE, variant, t, "the decoding loop")) return 1;

    /* In memory, into the same context and sampler. */
    soak_trace* a = run->again;
    memcpy(a->tokens, t->tokens, sizeof(pi_token) * (size_t)saved_at);
    a->n = saved_at;
    CALL(run, pi_context_state_load(ctx, -1, smp, run->state, len), "pi_context_state_load");
    ++run->counts.restores;
    if (sample_tokens(run, ctx, smp, seq, after, a, &ended)) return 1;
    if (same_tokens(run, t, a, saved_at, "after a restore in memory")) return 1;

    /* From the file, one sequence into another sequence of the other context (or of a new one),
     * with a new sampler. A single sequence's state carries no logits: the last token is decoded
     * again, as pi_generate does. */
    pi_context* target = run->aux;
    if (mix & (1u << 3)) {
        CALL(run, make_context(run, made), "pi_context_create");
        target = *made;
    } else if (clear(run, target, mix >> 4)) {
        return 1;
    }
    CALL(run, make_sampler(run, chain, other), "pi_sampler_create_for_model");
    const pi_seq_id into = (pi_seq_id)((seq + 1 + (mix >> 5) % (SOAK_N_SEQ - 1)) % SOAK_N_SEQ);
    CALL(run, pi_context_state_load_file(target, into, *other, run->state_path),
         "pi_context_state_load_file");
    ++run->counts.restores;
    REQUIRE(run, pi_kv_seq_pos_max(target, into) == n_past - 1,
            "the restored sequence ends at %d, saved at %d", (int)pi_kv_seq_pos_max(target, into),
            (int)n_past - 1);
    CALL(run, pi_kv_seq_remove(target, into, n_past - 1, -1), "pi_kv_seq_remove (the last token)");
    ++run->counts.seq_edits;
    if (decode_tokens(run, target, &last, 1, into)) return 1;
    a->n = saved_at;
    if (sample_tokens(run, target, *other, into, after, a, &ended)) return 1;
    return same_tokens(run, t, a, saved_at, "after a restore from a file");
}

static int scenario_state(soak_run* run, int variant, uint64_t mix) {
    pi_context* made = NULL;
    pi_sampler* other = NULL;
    const int failed = run_state(run, variant, mix, &made, &other);
    pi_sampler_free(other);
    pi_context_free(made);
    return failed;
}

int soak_scenario(soak_run* run, soak_kind kind, int variant, uint64_t mix) {
    ++run->counts.scenarios;
    ++run->counts.per_kind[kind];
    switch (kind) {
    case SOAK_GENERATE:
        return scenario_generate(run, variant, mix);
    case SOAK_CHAT:
        return scenario_chat(run, variant, mix);
    case SOAK_SHIFT:
        return scenario_shift(run, variant, mix);
    case SOAK_PARALLEL:
        return scenario_parallel(run, variant, mix);
    default:
        return scenario_state(run, variant, mix);
    }
}
