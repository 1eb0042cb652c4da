/*
 * powerinfer.h — the public C API of libpowerinfer.
 *
 * libpowerinfer runs ReLU-sparse large language models (ReluLLaMA-2, ProSparse-Llama-2,
 * Bamboo, ...) stored as PowerInfer GGUF files: a per-layer predictor says which FFN neurons
 * will fire and only those are computed.
 *
 * Threading contract
 * - A pi_model holds immutable weights. It may be shared by many threads and many contexts.
 * - A pi_context holds the KV cache, the scratch memory and the run statistics of one
 *   conversation. Use it from one thread at a time. pi_context_cancel() is the one call that
 *   may be made from another thread while the context is in use.
 * - A pi_sampler belongs to one thread at a time.
 * - pi_last_error() is per thread.
 *
 * Error contract
 * - Every fallible call returns a pi_status: 0 is success, negative values are errors, positive
 *   values are non-fatal outcomes (PI_STATUS_CANCELLED). The calling thread's pi_last_error()
 *   then names the file, tensor, key or argument at fault.
 * - Handles come back through out-parameters; every *_free accepts NULL.
 * - No call aborts, exits or asserts on any input.
 *
 * ABI contract (docs/abi.md)
 * - Parameter structs start with `size_t struct_size` and come from pi_*_default_params();
 *   fields are only ever appended, so programs built against an older header keep working:
 *   fields a caller's smaller struct lacks take their defaults. pi_*_default_params() are inline
 *   functions over pi_*_params_init(), so a struct is never returned across the ABI at a size
 *   the caller did not compile; the library keeps exporting the 0.1 functions of those names,
 *   which return 0.1's sizes, for programs built against 0.1.
 * - Output structs (pi_model_info, pi_context_stats, pi_predictor_audit, pi_generate_result,
 *   pi_token_event) also start with struct_size: the library fills only the prefix the caller's
 *   struct_size covers.
 * - No struct embeds another struct by value, so no struct's layout moves when another grows.
 */
#ifndef POWERINFER_H
#define POWERINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* On Windows the library's own sources are compiled with PI_BUILDING_DLL (CMake defines it) and
 * export; consumers import from powerinfer.dll. A consumer of a static build defines PI_STATIC. */
#if defined(_WIN32) && defined(PI_STATIC)
#define PI_API
#elif defined(_WIN32) && defined(PI_BUILDING_DLL)
#define PI_API __declspec(dllexport)
#elif defined(_WIN32)
#define PI_API __declspec(dllimport)
#elif defined(__GNUC__)
#define PI_API __attribute__((visibility("default")))
#else
#define PI_API
#endif

#define PI_VERSION_MAJOR 0
#define PI_VERSION_MINOR 4
#define PI_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, as pi_version_number() returns it. */
#define PI_VERSION_NUMBER (PI_VERSION_MAJOR * 10000 + PI_VERSION_MINOR * 100 + PI_VERSION_PATCH)

/* ---------------------------------------------------------------- status and errors */

typedef enum pi_status {
    PI_OK = 0,
    PI_STATUS_CANCELLED = 1,       /* stopped by a callback or pi_context_cancel() */
    PI_ERR_INVALID_ARGUMENT = -1,  /* NULL pointer, out-of-range value, bad token id */
    PI_ERR_IO = -2,                /* file missing, unreadable or unwritable */
    PI_ERR_FORMAT = -3,            /* malformed or inconsistent file */
    PI_ERR_UNSUPPORTED = -4,       /* valid but not supported by this build */
    PI_ERR_OUT_OF_MEMORY = -5,
    PI_ERR_CONTEXT_FULL = -6,      /* prompt or generation does not fit in n_ctx */
    PI_ERR_INTERNAL = -7
} pi_status;

/* Static name of a status, e.g. "PI_ERR_FORMAT". Never NULL. */
PI_API const char *pi_status_str(pi_status status);
/* The calling thread's last error message ("" if none). Valid until the thread's next call. */
PI_API const char *pi_last_error(void);

/* ---------------------------------------------------------------- version, system, logging */

/* "MAJOR.MINOR.PATCH". */
PI_API const char *pi_version(void);
/* The library's PI_VERSION_NUMBER: compare it with the header's to detect a mismatch at run time. */
PI_API uint32_t pi_version_number(void);
/* Human-readable summary: version, CPU features, compiled and loaded backends, devices, and
 * why a backend is unavailable. Static storage, valid until the next call. */
PI_API const char *pi_system_info(void);

typedef enum pi_log_level {
    PI_LOG_DEBUG = 0,
    PI_LOG_INFO = 1,
    PI_LOG_WARN = 2,
    PI_LOG_ERROR = 3
} pi_log_level;

typedef void (*pi_log_callback)(pi_log_level level, const char *message, void *user_data);
/* Sets where log messages go. NULL restores the default: warnings and errors to stderr.
 * Thread-safe. */
PI_API void pi_log_set(pi_log_callback callback, void *user_data);

/* ---------------------------------------------------------------- model */

typedef struct pi_model pi_model;
typedef int32_t pi_token;

/* Returning 0 from a progress callback cancels loading (pi_model_load returns
 * PI_STATUS_CANCELLED). progress is in [0, 1]. */
typedef int (*pi_progress_callback)(float progress, void *user_data);

typedef enum pi_ffn_activation {
    PI_FFN_ACTIVATION_AUTO = 0, /* from the file: sparse and ReLU-marked files ReLU, else SwiGLU */
    PI_FFN_ACTIVATION_RELU = 1, /* force the ReLU FFN (ReGLU for llama) */
    PI_FFN_ACTIVATION_SILU = 2  /* force SwiGLU */
} pi_ffn_activation;

typedef struct pi_model_params {
    size_t struct_size;
    int32_t use_mmap;                    /* 1 (default): map weights; 0: read them into memory */
    pi_progress_callback progress;       /* may be NULL */
    void *progress_user_data;
    int32_t ffn_activation;              /* pi_ffn_activation; dense files only */
    int32_t dense;                       /* 1: compute every FFN neuron even in a sparse file */
    int32_t override_sparse_threshold;   /* 1: use sparse_threshold below */
    float sparse_threshold;              /* neuron active iff predictor score >= threshold */
    double vram_budget;                  /* bytes for a GPU backend; < 0: free VRAM minus margin */
    int32_t reset_gpu_index;             /* 1: ignore <model>.generated.gpuidx and re-plan */
    int32_t disable_gpu_index;           /* 1: keep every FFN neuron on the CPU */
    /* Where hot FFN neurons go: NULL or "auto" (a CUDA or HIP device when one is usable, else
     * none), "cuda", "hip", "none", or "cpu" (a second CPU backend instance limited to
     * vram_budget bytes: the hybrid path without a GPU, for testing). */
    const char *offload_device;
    /* Activation statistics for the planner: our GGUF statistics file or PowerInfer's
     * activation/ folder. NULL: <model dir>/activation when present, else a short calibration
     * run of the predictors. */
    const char *activation_stats;
    /* KV cache positions to reserve on the offload device once every dense block fits there
     * (PowerInfer reserves it when a model is loaded with its context). Contexts with n_ctx up to
     * this keep the KV cache of device attention layers on the device; 0 (default): the KV cache
     * stays in host memory and attention scores are computed on the CPU. */
    int32_t kv_n_ctx;
} pi_model_params;

/* Fills the first struct_size bytes of *params with the defaults and sets params->struct_size
 * to struct_size; pi_model_default_params() is this for the caller's own struct (docs/abi.md). */
PI_API pi_status pi_model_params_init(pi_model_params *params, size_t struct_size);
static inline pi_model_params pi_model_default_params(void) {
    pi_model_params params;
    pi_model_params_init(&params, sizeof params);
    return params;
}

/* Loads a GGUF model ("GGUF" dense or "PWRI" sparse magic). On failure *out_model is NULL. */
PI_API pi_status pi_model_load(const char *path, const pi_model_params *params,
                               pi_model **out_model);
PI_API void pi_model_free(pi_model *model);

#define PI_MAX_LAYERS 256

typedef struct pi_model_info {
    size_t struct_size;
    char architecture[32];      /* "llama", "bamboo", "falcon", "opt" */
    char name[128];             /* general.name or "" */
    uint64_t n_params;          /* parameters (elements of all weights) */
    uint64_t file_size;         /* bytes */
    int32_t n_layer;
    int32_t n_embd;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_ff;
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t sparse;             /* 1: the file is a PowerInfer sparse file (PWRI) */
    int32_t sparse_inference;   /* 1: the predictor is used (sparse file and not forced dense) */
    int32_t ffn_activation;     /* pi_ffn_activation actually used (RELU or SILU) */
    float sparse_threshold;
    int32_t predictor_rank[PI_MAX_LAYERS]; /* fc1 rows per layer (0 for dense files) */
    char weight_type[16];       /* type of the FFN weights, e.g. "F16" */
    char offload_device[64];    /* the offload device, "" when everything runs on the CPU */
    uint64_t offload_bytes;     /* bytes of weights on that device: dense blocks and hot FFN rows */
    int32_t hot_neurons[PI_MAX_LAYERS]; /* per layer, FFN neurons on the device */
    int32_t attn_on_device[PI_MAX_LAYERS];      /* per layer, 1: attention weights on the device */
    int32_t predictor_on_device[PI_MAX_LAYERS]; /* per layer, 1: predictor on the device */
    int32_t output_on_device;   /* 1: output norm and projection on the device */
    int32_t kv_n_ctx_on_device; /* KV cache positions reserved on the device (0: host memory) */
} pi_model_info;

/* What a budget would place where, without uploading anything: the planner's report (bytes per
 * category, hot neurons per layer) as NUL-terminated text. params->vram_budget must be >= 0.
 * When params->offload_device names a GPU backend this machine lacks ("cuda" or "hip"), the
 * estimate still succeeds, for a device that computes every weight type, and its first line
 * says why that backend is unavailable.
 * On a short buffer returns PI_ERR_INVALID_ARGUMENT with *len set to the needed size (without
 * the NUL). */
PI_API pi_status pi_model_estimate_memory(const char *path, const pi_model_params *params, char *report,
                                          size_t capacity, size_t *len);

/* Fills *info; set info->struct_size = sizeof(pi_model_info) first. */
PI_API pi_status pi_model_info_get(const pi_model *model, pi_model_info *info);

/* ---------------------------------------------------------------- tokenizer */

/* Tokenizes UTF-8 text (text_len bytes; text need not be NUL-terminated). Writes at most
 * capacity ids and stores the number of tokens in *n_tokens. If capacity is too small,
 * returns PI_ERR_INVALID_ARGUMENT with *n_tokens set to the needed size (tokens may be NULL
 * with capacity 0 to query the size). */
PI_API pi_status pi_tokenize(const pi_model *model, const char *text, size_t text_len,
                             int32_t add_bos, pi_token *tokens, size_t capacity,
                             size_t *n_tokens);
/* Text of one token (bytes, not NUL-terminated) into buf; *len receives the needed size. A
 * byte-fallback token yields one raw byte that may be part of a multi-byte character. */
PI_API pi_status pi_token_to_piece(const pi_model *model, pi_token token, char *buf,
                                   size_t capacity, size_t *len);
/* Inverse of pi_tokenize: writes NUL-terminated text; *len receives the needed size without
 * the NUL. On a short buffer returns PI_ERR_INVALID_ARGUMENT with *len set. */
PI_API pi_status pi_detokenize(const pi_model *model, const pi_token *tokens, size_t n_tokens,
                               char *buf, size_t capacity, size_t *len);

PI_API pi_token pi_token_bos(const pi_model *model); /* -1 if none or model is NULL */
/* 1 when add_bos / PI_TOKENIZE_ADD_BOS puts BOS first for this model's vocabulary (SPM always;
 * byte-level BPE only with tokenizer.ggml.add_bos_token); 0 otherwise and for NULL. */
PI_API int32_t pi_vocab_adds_bos(const pi_model *model);
PI_API pi_token pi_token_eos(const pi_model *model);
PI_API pi_token pi_token_newline(const pi_model *model);
PI_API int32_t pi_n_vocab(const pi_model *model);

#define PI_TOKENIZE_ADD_BOS 1u       /* prepend BOS when the vocabulary uses one (pi_vocab_adds_bos) */
#define PI_TOKENIZE_PARSE_SPECIAL 2u /* the text of control tokens ("<s>", "<|im_start|>") is that token */
/* pi_tokenize with PI_TOKENIZE_* flags; the same buffer contract. Unknown flag bits are
 * PI_ERR_INVALID_ARGUMENT. */
PI_API pi_status pi_tokenize_with_flags(const pi_model *model, const char *text, size_t text_len,
                                        uint32_t flags, pi_token *tokens, size_t capacity,
                                        size_t *n_tokens);
/* End-of-turn token (tokenizer.ggml.eot_token_id, or a known end-of-turn text); -1 if none. */
PI_API pi_token pi_token_eot(const pi_model *model);
/* 1 when the token ends generation (EOS, EOT or another end-of-turn token); 0 otherwise and on
 * bad arguments. */
PI_API int32_t pi_token_is_eog(const pi_model *model, pi_token token);

/* ---------------------------------------------------------------- chat templates */

/* One message of a conversation; role is "system", "user" or "assistant". */
typedef struct pi_chat_message {
    const char *role;
    const char *content;
} pi_chat_message;

/* Renders messages with a chat template (docs/chat-templates.md). tmpl NULL: the model's
 * tokenizer.chat_template; else a template name ("llama2", "chatml", "vicuna", "zephyr",
 * "mistral", "llama3") or a Jinja template text that is recognised. add_assistant != 0: ends
 * with the opening of the assistant's turn. model may be NULL when tmpl is given. Writes
 * NUL-terminated text; on a short buffer PI_ERR_INVALID_ARGUMENT with *len = the needed size
 * without the NUL. An unknown template is PI_ERR_UNSUPPORTED naming it. The text holds special
 * tokens: tokenize it with PI_TOKENIZE_PARSE_SPECIAL (and without BOS when it starts with one). */
PI_API pi_status pi_chat_apply_template(const pi_model *model, const char *tmpl,
                                        const pi_chat_message *messages, size_t n_messages,
                                        int32_t add_assistant, char *buf, size_t capacity,
                                        size_t *len);
/* The name of the template pi_chat_apply_template would use (e.g. "chatml"); same contract. */
PI_API pi_status pi_chat_template_name(const pi_model *model, const char *tmpl, char *buf,
                                       size_t capacity, size_t *len);

/* ---------------------------------------------------------------- context */

typedef struct pi_context pi_context;
typedef struct pi_sampler pi_sampler;

typedef struct pi_context_params {
    size_t struct_size;
    int32_t n_ctx;      /* KV cache size in tokens (default 512; 0 = the model's n_ctx_train) */
    int32_t n_batch;    /* most tokens per pi_decode call (default 512) */
    int32_t n_threads;  /* CPU threads (default: hardware threads, at most 4); >= 1 */
    uint32_t seed;      /* RNG seed of pi_generate's sampler; PI_SEED_RANDOM = time-based */
    int32_t kv_f16;     /* 1 (default): F16 KV cache; 0: F32 */
    int32_t audit_predictor; /* 1: also compute every FFN neuron to measure the predictor (slow) */
    /* appended in 0.2 */
    int32_t n_seq_max;  /* sequences the KV cache holds at once, ids 0 .. n_seq_max-1 (default 1,
                         * at most PI_MAX_SEQUENCES); they share its n_ctx cells */
} pi_context_params;

#define PI_MAX_SEQUENCES 64

#define PI_SEED_RANDOM 0xFFFFFFFFu

/* Fills the first struct_size bytes of *params with the defaults and sets params->struct_size
 * to struct_size; pi_context_default_params() is this for the caller's own struct (docs/abi.md). */
PI_API pi_status pi_context_params_init(pi_context_params *params, size_t struct_size);
static inline pi_context_params pi_context_default_params(void) {
    pi_context_params params;
    pi_context_params_init(&params, sizeof params);
    return params;
}
PI_API pi_status pi_context_create(pi_model *model, const pi_context_params *params,
                                   pi_context **out_ctx);
PI_API void pi_context_free(pi_context *ctx);
PI_API int32_t pi_context_n_ctx(const pi_context *ctx);

/* Requests that the running pi_decode/pi_generate on ctx stop at the next layer boundary.
 * Safe to call from any thread; the request is cleared when the next call starts. */
PI_API void pi_context_cancel(pi_context *ctx);

/* Forgets cached positions >= pos of every sequence (0 clears everything). */
PI_API pi_status pi_kv_truncate(pi_context *ctx, int32_t pos);

/* A batch of tokens for sequence 0 (pi_seq_batch carries several). pos[i] is token i's
 * position; logits[i] != 0 requests its logits (NULL: only the last token's). Positions must be
 * < n_ctx. */
typedef struct pi_batch {
    int32_t n_tokens;
    const pi_token *tokens;
    const int32_t *pos;     /* NULL: consecutive positions after the cached ones */
    const int8_t *logits;   /* NULL: logits for the last token only */
} pi_batch;

/* Runs the model on the batch and stores the requested logits. Returns PI_STATUS_CANCELLED if
 * pi_context_cancel() interrupted it: the cache then forgets the batch's positions and
 * pi_context_n_past() drops to the batch's first position. */
PI_API pi_status pi_decode(pi_context *ctx, const pi_batch *batch);

/* Logits of the i-th token of the last batch (i = -1: the last token with logits). NULL if
 * that token's logits were not requested; n_vocab floats otherwise, valid until the next
 * pi_decode. */
PI_API const float *pi_get_logits(pi_context *ctx, int32_t i);

/* Sequence 0's next position: 1 + its highest cached position (what pi_decode uses when
 * batch.pos is NULL). */
PI_API int32_t pi_context_n_past(const pi_context *ctx);

/* ---------------------------------------------------------------- sequences */

typedef int32_t pi_seq_id;

/* Tokens of any sequences in one forward pass: each token attends only to the cached and batched
 * tokens of its own sequence, and the sparse FFN still chooses neurons per token. A token's
 * (sequence, position) already in the cache is replaced. */
typedef struct pi_seq_batch {
    size_t struct_size;       /* sizeof(pi_seq_batch) */
    int32_t n_tokens;         /* 1 .. n_batch */
    const pi_token *tokens;
    const int32_t *pos;       /* NULL: each token follows its sequence's last (cached or batched) */
    const pi_seq_id *seq_id;  /* NULL: every token is in sequence 0 */
    const int8_t *logits;     /* NULL: the logits of each sequence's last token of the batch */
} pi_seq_batch;

/* Runs the batch (pi_decode's contract); PI_ERR_CONTEXT_FULL when no free cell is left for a
 * token or a position is >= n_ctx, with the cache as before the call. */
PI_API pi_status pi_context_decode(pi_context *ctx, const pi_seq_batch *batch);
PI_API int32_t pi_context_n_seq_max(const pi_context *ctx);

/* Per-sequence cache edits (docs/sequences.md). Positions [p0, p1): p0 < 0 means 0, p1 < 0 means
 * to the end. A sequence id outside [0, n_seq_max) is PI_ERR_INVALID_ARGUMENT; seq = -1 in
 * pi_kv_seq_remove means every sequence. */
PI_API pi_status pi_kv_seq_remove(pi_context *ctx, pi_seq_id seq, int32_t p0, int32_t p1);
/* dst shares src's cached tokens in [p0, p1) without recomputing them (dst's own tokens in the
 * range are forgotten first). */
PI_API pi_status pi_kv_seq_copy(pi_context *ctx, pi_seq_id src, pi_seq_id dst, int32_t p0,
                                int32_t p1);
/* Forgets every sequence but seq. */
PI_API pi_status pi_kv_seq_keep(pi_context *ctx, pi_seq_id seq);
/* Adds delta to the positions in [p0, p1) of seq and re-rotates their cached keys; positions
 * that would fall below 0 are forgotten. */
PI_API pi_status pi_kv_seq_shift(pi_context *ctx, pi_seq_id seq, int32_t p0, int32_t p1,
                                 int32_t delta);
/* Lowest and highest cached position of seq; -1 when it is empty or the arguments are bad. */
PI_API int32_t pi_kv_seq_pos_min(const pi_context *ctx, pi_seq_id seq);
PI_API int32_t pi_kv_seq_pos_max(const pi_context *ctx, pi_seq_id seq);
/* Cache cells in use (a cell shared by copied sequences counts once). */
PI_API int32_t pi_kv_n_used_cells(const pi_context *ctx);

/* ---------------------------------------------------------------- saved state */

/* A context's state: the KV cache of one sequence (seq >= 0) or of all (seq = -1), the tokens
 * behind it (for pi_generate's cache reuse), the last logits and, when sampler is not NULL, that
 * sampler's state (history, mirostat, RNG). Loading into a context of the same model restores it
 * so that decoding and sampling continue bit-identically (docs/state.md). A single sequence's
 * state loads into sequence seq of the target, replacing it.
 * Save: buf NULL with capacity 0 asks the size; on a short buffer PI_ERR_INVALID_ARGUMENT with
 * *len = the needed size. Load: data from another model, another version, another KV type or
 * a truncated blob is PI_ERR_FORMAT naming the reason, and the context and sampler are untouched;
 * one that needs more cells or sequences than the context has is PI_ERR_CONTEXT_FULL. */
PI_API pi_status pi_context_state_save(pi_context *ctx, pi_seq_id seq, const pi_sampler *sampler,
                                       void *buf, size_t capacity, size_t *len);
PI_API pi_status pi_context_state_load(pi_context *ctx, pi_seq_id seq, pi_sampler *sampler,
                                       const void *data, size_t len);
/* The same to a file, written to a temporary file and renamed (PI_ERR_IO naming the path). */
PI_API pi_status pi_context_state_save_file(pi_context *ctx, pi_seq_id seq,
                                            const pi_sampler *sampler, const char *path);
PI_API pi_status pi_context_state_load_file(pi_context *ctx, pi_seq_id seq, pi_sampler *sampler,
                                            const char *path);

typedef struct pi_context_stats {
    size_t struct_size;
    uint64_t n_prompt_tokens;   /* tokens of multi-token batches */
    uint64_t n_decode_tokens;   /* tokens of single-token batches */
    double prompt_seconds;
    double decode_seconds;
    double ffn_active_fraction; /* average fraction of FFN neurons computed per layer and token */
    uint64_t decode_bytes;      /* bytes of weights and KV cache read by single-token batches */
    /* Appended after 0.4.0: copies between the host and an offload device (0 without one),
     * docs/hybrid.md. The decode_ fields count single-token batches only. */
    uint64_t decode_bytes_to_device; /* bytes copied host -> device by single-token batches */
    uint64_t decode_bytes_to_host;   /* bytes copied device -> host by single-token batches */
    uint64_t decode_downloads;       /* device -> host copies (each waits for the device) */
    uint64_t bytes_to_device;        /* host -> device, every batch */
    uint64_t bytes_to_host;          /* device -> host, every batch */
    double cpu_wait_seconds;    /* hybrid layers: the CPU waiting for the device's hot neurons */
    double device_wait_seconds; /* hybrid layers: the device waiting for the CPU's cold ones */
    /* Appended after 0.4.0: single-token batches on an offload device that submits a batch's
     * kernels as graphs (CUDA, HIP; 0 otherwise), docs/hybrid.md "Decode as graphs". */
    uint64_t decode_device_kernels;  /* kernels the device ran */
    uint64_t decode_device_launches; /* submissions they took: graphs plus single kernels */
} pi_context_stats;

PI_API pi_status pi_context_stats_get(const pi_context *ctx, pi_context_stats *stats);
PI_API void pi_context_stats_reset(pi_context *ctx);
/* Fraction of one layer's FFN neurons computed, averaged over the tokens counted in the stats. */
PI_API pi_status pi_context_layer_active_fraction(const pi_context *ctx, int32_t layer, double *fraction);

/* Predictor quality of one layer, counted over every token since the context was created or
 * its statistics were reset. Needs audit_predictor = 1 in the context params; a neuron is truly
 * active when its FFN activation is non-zero. */
typedef struct pi_predictor_audit {
    size_t struct_size;
    uint64_t tokens;
    uint64_t true_active;      /* (token, neuron) pairs with a non-zero activation */
    uint64_t predicted_active; /* pairs the predictor selected */
    uint64_t true_positive;    /* pairs both active and selected */
    double recall;             /* true_positive / true_active (1 when true_active is 0) */
    double precision;          /* true_positive / predicted_active (1 when predicted_active is 0) */
} pi_predictor_audit;

/* PI_ERR_INVALID_ARGUMENT for a bad layer; PI_ERR_UNSUPPORTED when auditing is off or the
 * model runs dense. */
PI_API pi_status pi_predictor_audit_get(const pi_context *ctx, int32_t layer, pi_predictor_audit *audit);

/* Sees one layer's FFN for one pi_decode batch, e.g. to collect a predictor's training data.
 * Called on the decoding thread once per layer per batch, in layer order, after the FFN's
 * activation and before its down projection adds into the residual stream (pi_generate's
 * decodes call it too).
 * - ffn_input [n_tokens][n_embd]: the residual stream before ffn_norm (what the predictor reads;
 *   falcon: the layer input).
 * - activation [n_tokens][n_ff]: the FFN activation the engine computed from gate·xn and up·xn,
 *   xn = ffn_norm(ffn_input) (ReGLU: relu(gate·xn) * (up·xn); bamboo: relu of both; SwiGLU for
 *   a dense SiLU file; falcon and opt: relu(up·xn (+ bias)), xn = attn_norm(ffn_input) for
 *   falcon). When every neuron is computed (a dense file, or
 *   pi_model_params.dense = 1 on a sparse file) it is the true activation: a neuron is active
 *   iff its value is non-zero, as pi_predictor_audit counts it. In sparse inference a neuron
 *   the predictor did not select is 0 whatever its true value, so non-zero then means "selected
 *   and truly active".
 * Row t belongs to the batch's token t. Both arrays are valid only during the call. The
 * observer must not call functions on the decoding context (pi_context_cancel excepted).
 * Return 0 to stop the decode: pi_decode then returns PI_STATUS_CANCELLED and the cache forgets
 * the batch, as after pi_context_cancel(). */
typedef int (*pi_ffn_observer)(int32_t layer, int32_t n_tokens, const float *ffn_input,
                               int32_t n_embd, const float *activation, int32_t n_ff,
                               void *user_data);

/* Sets ctx's FFN observer; NULL removes it. PI_ERR_UNSUPPORTED when some layer's FFN runs on an
 * offload device (hot neurons there, whose activations stay on the device): observe a model
 * loaded with offload_device = "none" or disable_gpu_index = 1. */
PI_API pi_status pi_context_set_ffn_observer(pi_context *ctx, pi_ffn_observer observer,
                                             void *user_data);

/* ---------------------------------------------------------------- sampling */

typedef struct pi_logit_bias {
    pi_token token;
    float bias; /* added to the token's logit; -INFINITY forbids it */
} pi_logit_bias;

/* The reorderable stages of the chain (docs/sampling.md). The chain runs: logit bias, the grammar,
 * the stages in order (default: this enum's order, llama.cpp's), then the pick: greedy when
 * temperature <= 0, mirostat when mirostat != 0, else a seeded draw. */
typedef enum pi_sampler_stage {
    PI_SAMPLER_STAGE_PENALTIES = 0,
    PI_SAMPLER_STAGE_DRY = 1,
    PI_SAMPLER_STAGE_TOP_K = 2,
    PI_SAMPLER_STAGE_TYPICAL = 3,
    PI_SAMPLER_STAGE_TOP_P = 4,
    PI_SAMPLER_STAGE_MIN_P = 5,
    PI_SAMPLER_STAGE_XTC = 6,
    PI_SAMPLER_STAGE_TEMPERATURE = 7
} pi_sampler_stage;

typedef struct pi_sampler_params {
    size_t struct_size;
    float temperature; /* 0.8; <= 0: greedy (argmax) */
    int32_t top_k;     /* 40; <= 0: all tokens */
    float top_p;       /* 0.95; 1: off */
    uint32_t seed;     /* PI_SEED_RANDOM: time-based */
    /* appended in 0.2; the defaults are llama.cpp's */
    float min_p;                 /* 0.05; 0: off */
    float typical_p;             /* 1: off */
    float dynatemp_range;        /* 0: off; else the temperature moves in temperature +- range */
    float dynatemp_exponent;     /* 1 */
    int32_t penalty_last_n;      /* 64: accepted tokens the penalties look at; 0: off; -1: all */
    float repeat_penalty;        /* 1: off */
    float frequency_penalty;     /* 0: off */
    float presence_penalty;      /* 0: off */
    float dry_multiplier;        /* 0: off */
    float dry_base;              /* 1.75 */
    int32_t dry_allowed_length;  /* 2 */
    int32_t dry_penalty_last_n;  /* -1: every accepted token */
    const char *const *dry_sequence_breakers; /* NULL: "\n", ":", "\"", "*" */
    size_t n_dry_sequence_breakers;
    float xtc_probability;       /* 0: off */
    float xtc_threshold;         /* 0.1 */
    int32_t mirostat;            /* 0: off; 1 or 2: mirostat v1 or v2 */
    float mirostat_tau;          /* 5 */
    float mirostat_eta;          /* 0.1 */
    int32_t min_keep;            /* 0: truncating stages may keep a single token */
    const pi_logit_bias *logit_bias;
    size_t n_logit_bias;
    const int32_t *stages;       /* pi_sampler_stage values in order; NULL: the default order */
    size_t n_stages;
    const char *grammar;         /* GBNF text (docs/grammar.md); NULL: none */
    const char *grammar_root;    /* NULL: "root" */
    const char *json_schema;     /* a JSON schema compiled to a grammar; NULL: none */
} pi_sampler_params;

/* Fills the first struct_size bytes of *params with the defaults and sets params->struct_size
 * to struct_size; pi_sampler_default_params() is this for the caller's own struct (docs/abi.md). */
PI_API pi_status pi_sampler_params_init(pi_sampler_params *params, size_t struct_size);
static inline pi_sampler_params pi_sampler_default_params(void) {
    pi_sampler_params params;
    pi_sampler_params_init(&params, sizeof params);
    return params;
}
/* A chain without a model: a grammar, a JSON schema, DRY sequence breakers and a logit bias need
 * the vocabulary and are PI_ERR_INVALID_ARGUMENT here. */
PI_API pi_status pi_sampler_create(const pi_sampler_params *params, pi_sampler **out);
/* A chain for model's vocabulary. A malformed grammar is PI_ERR_INVALID_ARGUMENT naming its line
 * and column. */
PI_API pi_status pi_sampler_create_for_model(const pi_model *model, const pi_sampler_params *params,
                                             pi_sampler **out);
PI_API void pi_sampler_free(pi_sampler *sampler);
/* Runs the chain over n_vocab logits, picks a token and accepts it (the penalties' history, the
 * grammar and mirostat advance). */
PI_API pi_status pi_sample(pi_sampler *sampler, const float *logits, int32_t n_vocab,
                           pi_token *out_token);
/* Records a token the sampler did not pick (e.g. of the prompt) in the history the penalties and
 * DRY look at; the grammar is not advanced. */
PI_API pi_status pi_sampler_accept(pi_sampler *sampler, pi_token token);
/* Forgets the history, restarts the grammar and mirostat, and reseeds the RNG with its seed. */
PI_API void pi_sampler_reset(pi_sampler *sampler);
/* The sampler's mutable state (history, grammar position, mirostat, RNG). Save: buf NULL with
 * capacity 0 asks the size; on a short buffer PI_ERR_INVALID_ARGUMENT with *len = the needed
 * size. Load: a blob of a differently configured sampler or a truncated one is PI_ERR_FORMAT
 * naming the reason, with the sampler untouched. */
PI_API pi_status pi_sampler_state_save(const pi_sampler *sampler, void *buf, size_t capacity,
                                       size_t *len);
PI_API pi_status pi_sampler_state_load(pi_sampler *sampler, const void *data, size_t len);

/* ---------------------------------------------------------------- generation */

/* Receives complete UTF-8 text only (bytes of a split character are held back until whole).
 * Return 0 to stop generation (pi_generate then returns PI_STATUS_CANCELLED). */
typedef int (*pi_token_callback)(const char *text, size_t len, void *user_data);

/* One generated token, for pi_token_event_callback. Valid only during the call. */
typedef struct pi_token_event {
    size_t struct_size;
    pi_token token;
    float logprob;               /* log-probability the model gave the token (log-softmax of the
                                  * logits, before sampling) */
    const char *text;            /* the complete UTF-8 text this token releases (may be empty while
                                  * bytes of a character or of a possible stop string wait) */
    size_t len;
    int32_t n_top;               /* alternatives below: the n_probs most probable tokens */
    const pi_token *top_tokens;
    const float *top_logprobs;
} pi_token_event;
/* Return 0 to stop generation (pi_generate then returns PI_STATUS_CANCELLED). */
typedef int (*pi_token_event_callback)(const pi_token_event *event, void *user_data);

typedef struct pi_generate_params {
    size_t struct_size;
    int32_t max_tokens;          /* default 128; generation also stops at an end-of-generation token */
    /* The basic sampler, in the place where 0.1 embedded a pi_sampler_params (its layout):
     * sampling_struct_size is ignored. sampler_params or sampler below replace these. */
    size_t sampling_struct_size;
    float temperature;           /* 0.8; <= 0: greedy */
    int32_t top_k;               /* 40 */
    float top_p;                 /* 0.95 */
    uint32_t seed;               /* PI_SEED_RANDOM: time-based */
    const char *const *stop;     /* stop strings (may be NULL); the match is not emitted */
    size_t n_stop;
    int32_t add_bos;             /* 1 (default) */
    pi_token_callback callback;  /* may be NULL */
    void *user_data;             /* for callback and on_token */
    /* appended in 0.2 */
    const pi_sampler_params *sampler_params; /* NULL: the basic fields above; else the whole chain */
    pi_sampler *sampler;         /* NULL; else the caller's chain, used and advanced (it keeps its
                                  * history across calls), replacing both */
    int32_t reuse_cache;         /* 1 (default): keep the cached tokens the prompt starts with and
                                  * decode only the rest; 0: clear the sequence first */
    int32_t context_shift;       /* 0 (default): stop with PI_STOP_CONTEXT_FULL when the context is
                                  * full; 1: keep the first n_keep tokens, drop half of the rest and
                                  * go on */
    int32_t n_keep;              /* tokens a context shift keeps at the start (default 1: BOS) */
    pi_seq_id seq_id;            /* the sequence to generate in (default 0) */
    int32_t parse_special;       /* 1: control-token text in the prompt is that token */
    pi_token_event_callback on_token; /* may be NULL; called after callback for each token */
    int32_t n_probs;             /* alternatives each pi_token_event carries (0 .. 64) */
} pi_generate_params;

typedef struct pi_generate_result {
    size_t struct_size;
    int32_t n_prompt_tokens;     /* tokens of the prompt, cached ones included */
    int32_t n_generated_tokens;
    double prompt_seconds;
    double decode_seconds;
    int32_t stop_reason;         /* pi_stop_reason */
    /* appended in 0.2 */
    int32_t n_cached_tokens;     /* prompt tokens the cache already held (not decoded again) */
    int32_t n_context_shifts;
} pi_generate_result;

typedef enum pi_stop_reason {
    PI_STOP_NONE = 0,
    PI_STOP_EOS = 1,
    PI_STOP_MAX_TOKENS = 2,
    PI_STOP_STRING = 3,
    PI_STOP_CALLBACK = 4,
    PI_STOP_CANCELLED = 5,
    PI_STOP_CONTEXT_FULL = 6     /* the context filled up before any other reason */
} pi_stop_reason;

/* Fills the first struct_size bytes of *params with the defaults and sets params->struct_size
 * to struct_size; pi_generate_default_params() is this for the caller's own struct (docs/abi.md). */
PI_API pi_status pi_generate_params_init(pi_generate_params *params, size_t struct_size);
static inline pi_generate_params pi_generate_default_params(void) {
    pi_generate_params params;
    pi_generate_params_init(&params, sizeof params);
    return params;
}
/* Tokenizes the prompt, keeps the cached tokens of seq_id it starts with (reuse_cache), decodes
 * the rest, then samples and streams tokens until an end-of-generation token, max_tokens, a stop
 * string, a callback returning 0 or pi_context_cancel(). The generated tokens stay in the cache,
 * so a chat's next turn sends the whole transcript and pays only for its new tokens. result may
 * be NULL. A prompt that does not fit in n_ctx is PI_ERR_CONTEXT_FULL. */
PI_API pi_status pi_generate(pi_context *ctx, const char *prompt,
                             const pi_generate_params *params, pi_generate_result *result);

/* ---------------------------------------------------------------- text streams (0.3) */

/* What pi_generate does with each sampled token's text, for callers that run their own decoding
 * loop (a server batching several sequences with pi_context_decode): it releases complete UTF-8
 * only, holds back bytes that may begin a stop string, and ends at a stop string without
 * releasing the match. One stream per generated reply. */
typedef struct pi_text_stream pi_text_stream;

/* stop: n_stop stop strings (may be NULL when n_stop is 0); empty ones are ignored. The strings
 * are copied. */
PI_API pi_status pi_text_stream_create(const pi_model *model, const char *const *stop,
                                       size_t n_stop, pi_text_stream **out);
PI_API void pi_text_stream_free(pi_text_stream *stream);
/* Adds token's text. *text and *len receive what it releases (possibly nothing; valid until the
 * next call on stream); *stopped = 1 when a stop string matched: the text before the match is
 * released with it, and the stream takes no more tokens (PI_ERR_INVALID_ARGUMENT). A token
 * outside the vocabulary is PI_ERR_INVALID_ARGUMENT. stopped may be NULL. */
PI_API pi_status pi_text_stream_push(pi_text_stream *stream, pi_token token, const char **text,
                                     size_t *len, int32_t *stopped);
/* Releases everything held back, for the end of a reply that did not stop at a stop string; an
 * unfinished character at the end becomes U+FFFD. The stream then starts over, empty. */
PI_API pi_status pi_text_stream_flush(pi_text_stream *stream, const char **text, size_t *len);

/* The log-softmax of n_vocab logits, as pi_token_event reports it: *logprob receives token's
 * log-probability, and top_tokens/top_logprobs (n_top entries each; may be NULL when n_top is
 * 0) the n_top most probable tokens, most likely first (equal ones by id). n_top is at most 64
 * and at most n_vocab. Empty or NaN logits, a token outside them or a bad n_top is
 * PI_ERR_INVALID_ARGUMENT. */
PI_API pi_status pi_logits_logprobs(const float *logits, int32_t n_vocab, pi_token token,
                                    int32_t n_top, float *logprob, pi_token *top_tokens,
                                    float *top_logprobs);

/* ---------------------------------------------------------------- synthetic models */

typedef struct pi_synth_params {
    size_t struct_size;
    const char *arch;        /* "llama" (default; also "llama-relu"), "prosparse", "bamboo",
                                "falcon", "falcon-40b" or "opt" (docs/synthetic-models.md) */
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx_train;
    int32_t predictor_rank;  /* 0: chosen by the construction */
    int32_t f16;             /* 1: F16 weights; 0: F32 */
    int32_t sparse;          /* 1: PowerInfer sparse file; 0: dense file */
    int32_t dense_relu;      /* dense files: mark the FFN as ReLU (default 1) */
    float sparsity;          /* target inactive fraction, default 0.9 */
    float power_law;         /* skew of neuron firing frequency, default 1 */
    float predictor_noise;   /* 0: exact predictor */
    uint64_t seed;
    const char *vocab_path;  /* vocab-only GGUF (e.g. tests/data/relu-llama-kjv.vocab.gguf) */
} pi_synth_params;

/* Fills the first struct_size bytes of *params with the defaults and sets params->struct_size
 * to struct_size; pi_synth_default_params() is this for the caller's own struct (docs/abi.md). */
PI_API pi_status pi_synth_params_init(pi_synth_params *params, size_t struct_size);
static inline pi_synth_params pi_synth_default_params(void) {
    pi_synth_params params;
    pi_synth_params_init(&params, sizeof params);
    return params;
}
/* Writes a synthetic PowerInfer-format model with realistic activation sparsity. */
PI_API pi_status pi_synth_model_write(const pi_synth_params *params, const char *out_path);

/* ---------------------------------------------------------------- quantization */

typedef struct pi_quantize_params {
    size_t struct_size;
    const char *type;          /* target, as PowerInfer's quantize names it: "Q4_0", "Q4_1",
                                  "Q5_0", "Q5_1", "Q8_0", "F16", "F32", "Q2_K", "Q3_K_S",
                                  "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
                                  "Q6_K" ("Q3_K", "Q4_K", "Q5_K": the _M ones) */
    int32_t n_threads;         /* <= 0: hardware threads */
    int32_t keep_predictor;    /* 1: leave fc1/fc2 at their input precision */
    pi_progress_callback progress; /* may be NULL; returning 0 cancels (no output is left) */
    void *progress_user_data;
    int32_t pure;              /* 1: every 2-D weight gets `type`; 0 (default): PowerInfer's
                                  mix (Q6_K output.weight, Q4_0/Q5_0 predictor, K-quant rules) */
    int32_t leave_output_tensor; /* 1: output.weight is copied unchanged */
} pi_quantize_params;

/* Fills the first struct_size bytes of *params with the defaults and sets params->struct_size
 * to struct_size; pi_quantize_default_params() is this for the caller's own struct (docs/abi.md). */
PI_API pi_status pi_quantize_params_init(pi_quantize_params *params, size_t struct_size);
static inline pi_quantize_params pi_quantize_default_params(void) {
    pi_quantize_params params;
    pi_quantize_params_init(&params, sizeof params);
    return params;
}
/* Converts a F32/F16 model (sparse or dense) to params->type, preserving the magic, metadata and
 * tensor order; 1-D tensors stay F32. Writes to a temporary file and renames it; refuses to
 * overwrite the input. */
PI_API pi_status pi_model_quantize(const char *in_path, const char *out_path,
                                   const pi_quantize_params *params);

#ifdef __cplusplus
}
#endif

#endif /* POWERINFER_H */
