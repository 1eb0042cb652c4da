#include <string.h>

#include "soak.h"
#include "tool_args.h"

static const char usage[] =
    "usage: pi-soak -m MODEL [--tokens N] [--seconds S] [options]\n"
    "Generates continuously on one model and one context: seeded generation with every kind of\n"
    "sampler chain (and grammars), several sequences with shared prefixes and removals, cleared\n"
    "and recreated contexts, context shifts, cache reuse, and saved states restored in memory\n"
    "and from files. Checks that every repetition of a scenario gives the tokens of its first\n"
    "run (a restored context those of the uninterrupted one) and that the resident memory stays\n"
    "flat after the warm-up.\n"
    "  -m, --model PATH        model file (a tiny one: pi-make-model)\n"
    "  -n, --tokens N          stop after the cycle that reaches N generated tokens\n"
    "                          (default 20000)\n"
    "      --seconds S         also stop after the cycle that reaches S seconds (default 0: no\n"
    "                          time limit)\n"
    "  -s, --seed N            seed of the schedule and of the samplers (default 1)\n"
    "  -t, --threads N         CPU threads (default 2)\n"
    "      --warmup-cycles N   cycles before the RSS baseline (default 2; the first cycle runs\n"
    "                          every scenario once and records the references)\n"
    "      --max-rss-growth-kib K  allowed RSS growth after the warm-up (default 1024)\n"
    "      --no-rss-check      measure and report the RSS but do not fail on its growth\n"
    "                          (e.g. under AddressSanitizer, whose quarantine holds freed memory)\n"
    "      --scenarios N       scenarios drawn per cycle after the first (default 16)\n"
    "      --recreate-every N  free and recreate the contexts and samplers every N cycles\n"
    "                          (default 3; 0: never)\n"
    "      --reload-every N    free and reload the model every N cycles (default 10; 0: never)\n"
    "      --tmp-dir DIR       folder for the saved-state file (default: a new folder under\n"
    "                          $TMPDIR or /tmp, removed at the end)\n"
    "      --progress          a line per cycle on stderr\n"
    "      --json              print the summary as one JSON object\n"
    "  -h, --help              this text\n"
    "Exit status: 0 every check passed, 1 a check or a library call failed (one line on stderr\n"
    "says which), 2 bad arguments.\n";

/* The largest counts: more than any run needs, and sums of them cannot overflow. */
enum { max_count = 1000000000 };

int soak_parse_options(int argc, char** argv, soak_options* o) {
    memset(o, 0, sizeof *o);
    o->tokens = 20000;
    o->seed = 1;
    o->threads = 2;
    o->warmup_cycles = 2;
    o->max_rss_growth_kib = 1024;
    o->rss_check = 1;
    o->scenarios_per_cycle = 16;
    o->recreate_every = 3;
    o->reload_every = 10;
    tool_args a = tool_args_start(argc, argv, usage);
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, "-m", "--model"))
            o->model = tool_args_text(&a);
        else if (tool_args_is(&a, "-n", "--tokens"))
            tool_args_int64(&a, 1, INT64_C(1) << 40, &o->tokens);
        else if (tool_args_is(&a, NULL, "--seconds"))
            tool_args_double(&a, 0, 1e9, &o->seconds);
        else if (tool_args_is(&a, "-s", "--seed"))
            tool_args_uint64(&a, 0, UINT64_MAX, &o->seed);
        else if (tool_args_is(&a, "-t", "--threads"))
            tool_args_int(&a, 1, 1024, &o->threads);
        else if (tool_args_is(&a, NULL, "--warmup-cycles"))
            tool_args_int(&a, 1, max_count, &o->warmup_cycles);
        else if (tool_args_is(&a, NULL, "--max-rss-growth-kib"))
            tool_args_int64(&a, 0, INT64_C(1) << 40, &o->max_rss_growth_kib);
        else if (tool_args_is(&a, NULL, "--no-rss-check"))
            o->rss_check = 0;
        else if (tool_args_is(&a, NULL, "--scenarios"))
            tool_args_int(&a, 1, max_count, &o->scenarios_per_cycle);
        else if (tool_args_is(&a, NULL, "--recreate-every"))
            tool_args_int(&a, 0, max_count, &o->recreate_every);
        else if (tool_args_is(&a, NULL, "--reload-every"))
            tool_args_int(&a, 0, max_count, &o->reload_every);
        else if (tool_args_is(&a, NULL, "--tmp-dir"))
            o->tmp_dir = tool_args_text(&a);
        else if (tool_args_is(&a, NULL, "--progress"))
            o->progress = 1;
        else if (tool_args_is(&a, NULL, "--json"))
            o->json = 1;
        else
            tool_args_unknown(&a);
    }
    if (!o->model)
        tool_args_fail(&a, "-m: a model path is required");
    else if (!*o->model)
        tool_args_fail(&a, "-m: empty path");
    if (o->tmp_dir && !*o->tmp_dir) tool_args_fail(&a, "--tmp-dir: empty path");
    return tool_args_finish(&a);
}
