#include "options.hpp"

#include <algorithm>
#include <string_view>

#include "powerinfer.h"
#include "tool_args.h"

namespace pi::bench {

const char* mode_name(mode m) {
    return m == mode::sparse ? "sparse" : "dense";
}

namespace {

constexpr char usage[] =
    "usage: pi-bench -m MODEL [-m MODEL ...] [options]\n"
    "Measures prompt processing (pp) and text generation (tg) throughput, compares decoding\n"
    "with the memory-bandwidth limit of this machine and reports the memory footprint.\n"
    "  -m, --model PATH     model to benchmark (repeatable)\n"
    "  -p, --n-prompt N     prompt tokens decoded in one batch per pp run (default 64; 0 "
    "skips pp)\n"
    "  -n, --n-gen N        tokens generated one at a time per tg run (default 64; 0 skips "
    "tg)\n"
    "  -r, --repetitions N  timed runs of each test (default 5)\n"
    "  -t, --threads N      CPU threads for the engine and the bandwidth probe (default 2)\n"
    "      --warmup N       untimed runs of each test first (default 1)\n"
    "      --modes LIST     comma-separated: sparse (predictor), dense (every FFN neuron);\n"
    "                       default sparse,dense; a dense file only runs dense\n"
    "  -c, --ctx-size N     KV cache positions (default n-prompt + n-gen + 16)\n"
    "      --json           print one JSON document instead of the markdown report\n"
    "      --no-bandwidth   skip the memory read-bandwidth probe\n"
    "      --vram-budget GiB  offload device memory for dense blocks, KV cache and hot FFN "
    "neurons\n"
    "      --offload-device D auto, cuda, hip, cpu (a second CPU instance) or none\n"
    "  -np, --parallel N    also decode N sequences together (prompts of -p tokens, then -n\n"
    "                       steps of one token per sequence) against one alone (default 1: off)\n"
    "      --chat-turns K   also a K-turn chat through pi_generate with cache reuse: messages of\n"
    "                       about -p tokens, replies of -n tokens; prompt ms and t/s per turn\n"
    "  -h, --help           this text\n";

// Upper bound of every count, so that sums like n_prompt + n_gen cannot overflow.
constexpr int max_count = 1 << 24;
// More turns than any context holds at the smallest sizes.
constexpr int max_chat_turns = 1 << 16;

// The value of --modes: a comma-separated list of distinct modes.
void parse_modes(tool_args& a, std::vector<mode>& out) {
    const char* value = tool_args_text(&a);
    if (!value) return;
    std::string_view text = value;
    out.clear();
    while (true) {
        const size_t comma = text.find(',');
        const std::string item(text.substr(0, comma));
        mode m{};
        if (item == "sparse")
            m = mode::sparse;
        else if (item == "dense")
            m = mode::dense;
        else {
            tool_args_fail(&a, "--modes: unknown mode '%s' (expected sparse or dense)",
                           item.c_str());
            return;
        }
        for (mode seen : out) {
            if (seen == m) {
                tool_args_fail(&a, "--modes: '%s' is listed twice", item.c_str());
                return;
            }
        }
        out.push_back(m);
        if (comma == std::string_view::npos) return;
        text.remove_prefix(comma + 1);
    }
}

void add_model(tool_args& a, std::vector<std::string>& models) {
    const char* path = tool_args_text(&a);
    if (path && *path == '\0')
        tool_args_fail(&a, "%s: empty path", a.arg);
    else if (path)
        models.emplace_back(path);
}

} // namespace

std::optional<options> parse_options(int argc, char** argv) {
    options o;
    tool_args a = tool_args_start(argc, argv, usage);
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, nullptr, "--json"))
            o.json = true;
        else if (tool_args_is(&a, nullptr, "--no-bandwidth"))
            o.bandwidth = false;
        else if (tool_args_is(&a, "-m", "--model"))
            add_model(a, o.models);
        else if (tool_args_is(&a, "-p", "--n-prompt"))
            tool_args_int(&a, 0, max_count, &o.n_prompt);
        else if (tool_args_is(&a, "-n", "--n-gen"))
            tool_args_int(&a, 0, max_count, &o.n_gen);
        else if (tool_args_is(&a, "-r", "--repetitions"))
            tool_args_int(&a, 1, max_count, &o.repetitions);
        else if (tool_args_is(&a, "-t", "--threads"))
            tool_args_int(&a, 1, max_count, &o.threads);
        else if (tool_args_is(&a, nullptr, "--warmup"))
            tool_args_int(&a, 0, max_count, &o.warmup);
        else if (tool_args_is(&a, nullptr, "--modes"))
            parse_modes(a, o.modes);
        else if (tool_args_is(&a, "-c", "--ctx-size"))
            tool_args_int(&a, 1, max_count, &o.n_ctx);
        else if (tool_args_is(&a, nullptr, "--vram-budget"))
            tool_args_double(&a, 0, 1e6, &o.vram_budget_gib);
        else if (tool_args_is(&a, "-np", "--parallel"))
            tool_args_int(&a, 1, PI_MAX_SEQUENCES, &o.parallel);
        else if (tool_args_is(&a, nullptr, "--chat-turns"))
            tool_args_int(&a, 0, max_chat_turns, &o.chat_turns);
        else if (tool_args_is(&a, nullptr, "--offload-device")) {
            if (const char* device = tool_args_text(&a)) o.offload_device = device;
        } else
            tool_args_unknown(&a);
    }
    const int longest = std::max(o.n_prompt, o.n_gen);
    if (o.models.empty())
        tool_args_fail(&a, "no model given (-m MODEL)");
    else if (o.n_prompt == 0 && o.n_gen == 0)
        tool_args_fail(&a, "-p and -n are both 0: nothing to measure");
    else if (o.n_ctx == 0)
        o.n_ctx = o.n_prompt + o.n_gen + ctx_slack;
    else if (o.n_ctx < longest)
        tool_args_fail(&a, "-c %d is smaller than the longest test (%d tokens)", o.n_ctx, longest);
    if (o.parallel > 1 && o.n_gen == 0)
        tool_args_fail(&a, "--parallel %d: -n is 0, no steps to time", o.parallel);
    if (tool_args_finish(&a) != 0) return std::nullopt;
    return o;
}

} // namespace pi::bench
