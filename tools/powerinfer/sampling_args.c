#include "sampling_args.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

const char sampling_args_usage[] =
    "sampling (pi_sampler_params; defaults are the library's, llama.cpp's):\n"
    "  -s, --seed N           RNG seed (default -1: random)\n"
    "      --temp F           temperature (default 0.8; <= 0 = greedy)\n"
    "      --top-k N          top-k (default 40; 0 = off)\n"
    "      --top-p F          top-p (default 0.95; 1 = off)\n"
    "      --min-p F          min-p (default 0.05; 0 = off)\n"
    "      --typical F        locally typical sampling, p (default 1 = off)\n"
    "      --dynatemp-range F dynamic temperature: temp +- F (default 0 = off)\n"
    "      --dynatemp-exp F   dynamic temperature exponent (default 1)\n"
    "      --repeat-last-n N  tokens the penalties look at (default 64; 0 = off, -1 = all)\n"
    "      --repeat-penalty F repetition penalty (default 1 = off)\n"
    "      --presence-penalty F  presence penalty (default 0 = off)\n"
    "      --frequency-penalty F frequency penalty (default 0 = off)\n"
    "      --dry-multiplier F DRY multiplier (default 0 = off)\n"
    "      --dry-base F       DRY base (default 1.75)\n"
    "      --dry-allowed-length N  repeats DRY leaves alone (default 2)\n"
    "      --dry-penalty-last-n N  tokens DRY looks at (default -1 = all; 0 = off)\n"
    "      --dry-sequence-breaker S  a DRY sequence breaker (repeatable; \\n, \\t, \\\\ and \\\" "
    "are\n"
    "                         escapes); the first replaces the default \\n : \" *; \"none\": no "
    "breakers\n"
    "      --xtc-probability F  XTC probability (default 0 = off)\n"
    "      --xtc-threshold F  XTC threshold (default 0.1)\n"
    "      --mirostat N       0 = off (default), 1 = mirostat, 2 = mirostat 2.0\n"
    "      --mirostat-lr F    mirostat learning rate, eta (default 0.1)\n"
    "      --mirostat-ent F   mirostat target entropy, tau (default 5)\n"
    "      --min-keep N       tokens every truncating sampler keeps (default 0)\n"
    "  -l, --logit-bias T+B   add B to token T's logit (T-B subtracts; T-inf forbids T); "
    "repeatable\n"
    "      --samplers LIST    stage order, ';'-separated, of penalties, dry, top_k, typ_p, top_p,\n"
    "                         min_p, xtc, temperature (default: that order)\n"
    "      --grammar GBNF     constrain the output to a GBNF grammar\n"
    "      --grammar-file F   the same, read from a file\n"
    "  -j, --json-schema JSON constrain the output to a JSON schema\n"
    "  -jf, --json-schema-file F  the same, read from a file\n";

void sampling_args_init(sampling_args* s) {
    memset(s, 0, sizeof *s);
    s->params = pi_sampler_default_params();
    s->seed = -1;
}

void sampling_args_free(sampling_args* s) {
    free(s->logit_bias);
    for (size_t i = 0; i < s->n_breakers; ++i)
        free(s->breakers[i]);
    free(s->breakers);
    free(s->file_text);
    memset(s, 0, sizeof *s);
}

/* "TOKEN+BIAS" or "TOKEN-BIAS", as llama.cpp writes a logit bias; BIAS may be "inf" with '-'. */
static void parse_logit_bias(tool_args* a, sampling_args* s) {
    const char* text = tool_args_text(a);
    if (!text) return;
    const char* p = text;
    long token = 0;
    while (isdigit((unsigned char)*p) && token <= INT32_MAX)
        token = token * 10 + (*p++ - '0');
    const char sign = *p;
    int ok = p != text && token <= INT32_MAX && (sign == '+' || sign == '-');
    double bias = 0;
    if (ok) {
        char* end = NULL;
        errno = 0;
        const char* value = p + 1;
        bias = (isdigit((unsigned char)*value) || *value == '.' || *value == 'i' || *value == 'I')
                   ? strtod(value, &end)
                   : 0;
        ok = end && end != value && *end == '\0' && errno == 0;
        if (sign == '-') bias = -bias;
    }
    if (!ok) {
        tool_args_fail(a, "%s: expects TOKEN+BIAS or TOKEN-BIAS (e.g. 15043+1, 2-inf), got '%s'",
                       a->arg, text);
        return;
    }
    if (isnan(bias) || bias == HUGE_VAL || (isfinite(bias) && fabs(bias) > FLT_MAX)) {
        tool_args_fail(a, "%s: the bias must be a finite number or -inf, got '%s'", a->arg, text);
        return;
    }
    pi_logit_bias* grown = realloc(s->logit_bias, (s->n_logit_bias + 1) * sizeof *grown);
    if (!grown) {
        tool_args_fail(a, "%s: out of memory", a->arg);
        return;
    }
    s->logit_bias = grown;
    s->logit_bias[s->n_logit_bias].token = (pi_token)token;
    s->logit_bias[s->n_logit_bias].bias = isfinite(bias) ? (float)bias : -INFINITY;
    ++s->n_logit_bias;
}

/* llama.cpp's names of the stages, and the other spellings it accepts. */
static const struct {
    const char* name;
    pi_sampler_stage stage;
} stage_names[] = {
    {"penalties", PI_SAMPLER_STAGE_PENALTIES},
    {"dry", PI_SAMPLER_STAGE_DRY},
    {"top_k", PI_SAMPLER_STAGE_TOP_K},
    {"top-k", PI_SAMPLER_STAGE_TOP_K},
    {"typ_p", PI_SAMPLER_STAGE_TYPICAL},
    {"typ-p", PI_SAMPLER_STAGE_TYPICAL},
    {"typical", PI_SAMPLER_STAGE_TYPICAL},
    {"typical_p", PI_SAMPLER_STAGE_TYPICAL},
    {"top_p", PI_SAMPLER_STAGE_TOP_P},
    {"top-p", PI_SAMPLER_STAGE_TOP_P},
    {"nucleus", PI_SAMPLER_STAGE_TOP_P},
    {"min_p", PI_SAMPLER_STAGE_MIN_P},
    {"min-p", PI_SAMPLER_STAGE_MIN_P},
    {"xtc", PI_SAMPLER_STAGE_XTC},
    {"temperature", PI_SAMPLER_STAGE_TEMPERATURE},
    {"temp", PI_SAMPLER_STAGE_TEMPERATURE},
};

static int stage_of(const char* name, size_t len, pi_sampler_stage* out) {
    for (size_t i = 0; i < sizeof stage_names / sizeof stage_names[0]; ++i) {
        if (strlen(stage_names[i].name) == len && memcmp(stage_names[i].name, name, len) == 0) {
            *out = stage_names[i].stage;
            return 1;
        }
    }
    return 0;
}

/* A ';'- (or ',')-separated list of distinct stage names. */
static void parse_samplers(tool_args* a, sampling_args* s) {
    const char* text = tool_args_text(a);
    if (!text) return;
    size_t n = 0;
    const char* item = text;
    while (1) {
        const size_t len = strcspn(item, ";,");
        pi_sampler_stage stage;
        if (!stage_of(item, len, &stage)) {
            tool_args_fail(a,
                           "%s: unknown sampler '%.*s' (expected penalties, dry, top_k, typ_p, "
                           "top_p, min_p, xtc or temperature)",
                           a->arg, (int)len, item);
            return;
        }
        for (size_t i = 0; i < n; ++i) {
            if (s->stages[i] == (int32_t)stage) {
                tool_args_fail(a, "%s: '%.*s' is listed twice", a->arg, (int)len, item);
                return;
            }
        }
        s->stages[n++] = (int32_t)stage;
        if (item[len] == '\0') break;
        item += len + 1;
    }
    s->params.stages = s->stages;
    s->params.n_stages = n;
}

/* A copy of text with the escapes \n, \t, \r, \\, \" and \' replaced by the characters. */
static char* unescaped(const char* text) {
    char* out = malloc(strlen(text) + 1);
    if (!out) return NULL;
    char* w = out;
    for (const char* r = text; *r; ++r) {
        if (*r != '\\' || r[1] == '\0') {
            *w++ = *r;
            continue;
        }
        switch (*++r) {
        case 'n':
            *w++ = '\n';
            break;
        case 't':
            *w++ = '\t';
            break;
        case 'r':
            *w++ = '\r';
            break;
        default:
            *w++ = *r;
            break;
        }
    }
    *w = '\0';
    return out;
}

static void parse_breaker(tool_args* a, sampling_args* s) {
    const char* text = tool_args_text(a);
    if (!text) return;
    s->breakers_given = 1;
    if (strcmp(text, "none") == 0) return;
    if (*text == '\0') {
        tool_args_fail(a, "%s: empty sequence breaker (use \"none\" for no breakers)", a->arg);
        return;
    }
    char** grown = realloc(s->breakers, (s->n_breakers + 1) * sizeof *grown);
    char* copy = grown ? unescaped(text) : NULL;
    if (grown) s->breakers = grown;
    if (!copy) {
        tool_args_fail(a, "%s: out of memory", a->arg);
        return;
    }
    s->breakers[s->n_breakers++] = copy;
}

/* --grammar, --grammar-file, --json-schema and --json-schema-file exclude one another. */
static void parse_grammar_value(tool_args* a, sampling_args* s, const char** slot) {
    if (s->grammar_flag) {
        tool_args_fail(a,
                       "%s: give one of --grammar, --grammar-file, --json-schema and "
                       "--json-schema-file (%s is given already)",
                       a->arg, s->grammar_flag);
        return;
    }
    s->grammar_flag = a->arg;
    const char* text = tool_args_text(a);
    if (!text) return;
    if (*text == '\0') {
        tool_args_fail(a, "%s: empty value", a->arg);
        return;
    }
    *slot = text;
}

int sampling_args_parse(tool_args* a, sampling_args* s) {
    pi_sampler_params* p = &s->params;
    const double inf = HUGE_VAL;
    if (tool_args_is(a, "-s", "--seed"))
        tool_args_int64(a, INT32_MIN, UINT32_MAX, &s->seed);
    else if (tool_args_is(a, NULL, "--temp"))
        tool_args_float(a, -inf, inf, &p->temperature);
    else if (tool_args_is(a, NULL, "--top-k"))
        tool_args_int(a, INT_MIN, INT_MAX, &p->top_k);
    else if (tool_args_is(a, NULL, "--top-p"))
        tool_args_float(a, 0, 1, &p->top_p);
    else if (tool_args_is(a, NULL, "--min-p"))
        tool_args_float(a, 0, 1, &p->min_p);
    else if (tool_args_is(a, NULL, "--typical"))
        tool_args_float(a, 0, 1, &p->typical_p);
    else if (tool_args_is(a, NULL, "--dynatemp-range"))
        tool_args_float(a, 0, inf, &p->dynatemp_range);
    else if (tool_args_is(a, NULL, "--dynatemp-exp"))
        tool_args_float(a, 0, inf, &p->dynatemp_exponent);
    else if (tool_args_is(a, NULL, "--repeat-last-n"))
        tool_args_int(a, -1, INT_MAX, &p->penalty_last_n);
    else if (tool_args_is(a, NULL, "--repeat-penalty"))
        tool_args_float(a, 0, inf, &p->repeat_penalty);
    else if (tool_args_is(a, NULL, "--presence-penalty"))
        tool_args_float(a, -inf, inf, &p->presence_penalty);
    else if (tool_args_is(a, NULL, "--frequency-penalty"))
        tool_args_float(a, -inf, inf, &p->frequency_penalty);
    else if (tool_args_is(a, NULL, "--dry-multiplier"))
        tool_args_float(a, 0, inf, &p->dry_multiplier);
    else if (tool_args_is(a, NULL, "--dry-base"))
        tool_args_float(a, 0, inf, &p->dry_base);
    else if (tool_args_is(a, NULL, "--dry-allowed-length"))
        tool_args_int(a, 0, INT_MAX, &p->dry_allowed_length);
    else if (tool_args_is(a, NULL, "--dry-penalty-last-n"))
        tool_args_int(a, -1, INT_MAX, &p->dry_penalty_last_n);
    else if (tool_args_is(a, NULL, "--dry-sequence-breaker"))
        parse_breaker(a, s);
    else if (tool_args_is(a, NULL, "--xtc-probability"))
        tool_args_float(a, 0, 1, &p->xtc_probability);
    else if (tool_args_is(a, NULL, "--xtc-threshold"))
        tool_args_float(a, 0, 1, &p->xtc_threshold);
    else if (tool_args_is(a, NULL, "--mirostat"))
        tool_args_int(a, 0, 2, &p->mirostat);
    else if (tool_args_is(a, NULL, "--mirostat-lr"))
        tool_args_float(a, 0, inf, &p->mirostat_eta);
    else if (tool_args_is(a, NULL, "--mirostat-ent"))
        tool_args_float(a, 0, inf, &p->mirostat_tau);
    else if (tool_args_is(a, NULL, "--min-keep"))
        tool_args_int(a, 0, INT_MAX, &p->min_keep);
    else if (tool_args_is(a, "-l", "--logit-bias"))
        parse_logit_bias(a, s);
    else if (tool_args_is(a, NULL, "--samplers"))
        parse_samplers(a, s);
    else if (tool_args_is(a, NULL, "--grammar"))
        parse_grammar_value(a, s, &p->grammar);
    else if (tool_args_is(a, NULL, "--grammar-file"))
        parse_grammar_value(a, s, &s->grammar_file);
    else if (tool_args_is(a, "-j", "--json-schema"))
        parse_grammar_value(a, s, &p->json_schema);
    else if (tool_args_is(a, "-jf", "--json-schema-file"))
        parse_grammar_value(a, s, &s->json_schema_file);
    else
        return 0;
    return 1;
}

int sampling_args_finish(sampling_args* s) {
    pi_sampler_params* p = &s->params;
    p->seed = s->seed < 0 ? PI_SEED_RANDOM : (uint32_t)s->seed;
    p->logit_bias = s->logit_bias;
    p->n_logit_bias = s->n_logit_bias;
    if (s->breakers_given) {
        /* A non-NULL list, even an empty one ("none"), replaces the default breakers. */
        static const char* const no_breakers[1] = {NULL};
        p->dry_sequence_breakers = s->n_breakers ? (const char* const*)s->breakers : no_breakers;
        p->n_dry_sequence_breakers = s->n_breakers;
    }
    const char* path = s->grammar_file ? s->grammar_file : s->json_schema_file;
    if (!path) return 0;
    s->file_text = tool_read_file(path, NULL);
    if (!s->file_text)
        return tool_fail(1, "%s: cannot read '%s': %s",
                         s->grammar_file ? "--grammar-file" : "--json-schema-file", path,
                         strerror(errno));
    if (s->grammar_file)
        p->grammar = s->file_text;
    else
        p->json_schema = s->file_text;
    return 0;
}
