#include "options.hpp"
#include <cstdlib>

#include <charconv>
#include <cstdio>
#include <string_view>

namespace pi::bench {

const char* mode_name(mode m) {
    return m == mode::sparse ? "sparse" : "dense";
}

void print_usage() {
    std::fputs(
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
        "  -h, --help           this text\n",
        stdout);
}

namespace {

// Upper bound of every count, so that sums like n_prompt + n_gen cannot overflow.
constexpr int max_count = 1 << 24;

bool parse_int(std::string_view flag, std::string_view text, int min, int& out,
               std::string& error) {
    int v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < min ||
        v > max_count) {
        error = std::string(flag) + ": expects an integer in [" + std::to_string(min) + ", " +
                std::to_string(max_count) + "], got '" + std::string(text) + "'";
        return false;
    }
    out = v;
    return true;
}

bool parse_modes(std::string_view text, std::vector<mode>& out, std::string& error) {
    out.clear();
    while (true) {
        const size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        mode m{};
        if (item == "sparse")
            m = mode::sparse;
        else if (item == "dense")
            m = mode::dense;
        else {
            error = "--modes: unknown mode '" + std::string(item) + "' (expected sparse or dense)";
            return false;
        }
        for (mode seen : out) {
            if (seen == m) {
                error = "--modes: '" + std::string(item) + "' is listed twice";
                return false;
            }
        }
        out.push_back(m);
        if (comma == std::string_view::npos) return true;
        text.remove_prefix(comma + 1);
    }
}

} // namespace

std::optional<options> parse_options(int argc, char** argv, std::string& error, bool& help) {
    options o;
    help = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "-h" || a == "--help") {
            help = true;
            return o;
        }
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (a == "--no-bandwidth") {
            o.bandwidth = false;
            continue;
        }
        const bool takes_value = a == "-m" || a == "--model" || a == "-p" || a == "--n-prompt" ||
                                 a == "-n" || a == "--n-gen" || a == "-r" || a == "--repetitions" ||
                                 a == "-t" || a == "--threads" || a == "--warmup" ||
                                 a == "--modes" || a == "-c" || a == "--ctx-size" ||
                                 a == "--vram-budget" || a == "--offload-device";
        if (!takes_value) {
            error = "unknown argument '" + std::string(a) + "' (see --help)";
            return std::nullopt;
        }
        if (i + 1 >= argc) {
            error = std::string(a) + ": missing value";
            return std::nullopt;
        }
        const std::string_view v = argv[++i];
        bool ok = true;
        if (a == "-m" || a == "--model") {
            if (v.empty()) {
                error = std::string(a) + ": empty path";
                return std::nullopt;
            }
            o.models.emplace_back(v);
        } else if (a == "-p" || a == "--n-prompt")
            ok = parse_int(a, v, 0, o.n_prompt, error);
        else if (a == "-n" || a == "--n-gen")
            ok = parse_int(a, v, 0, o.n_gen, error);
        else if (a == "-r" || a == "--repetitions")
            ok = parse_int(a, v, 1, o.repetitions, error);
        else if (a == "-t" || a == "--threads")
            ok = parse_int(a, v, 1, o.threads, error);
        else if (a == "--warmup")
            ok = parse_int(a, v, 0, o.warmup, error);
        else if (a == "--modes")
            ok = parse_modes(v, o.modes, error);
        else if (a == "--offload-device")
            o.offload_device = v;
        else if (a == "--vram-budget") {
            const std::string text(v);
            char* end = nullptr;
            o.vram_budget_gib = std::strtod(text.c_str(), &end);
            ok = !text.empty() && *end == '\0' && o.vram_budget_gib >= 0 && o.vram_budget_gib < 1e6;
            if (!ok) error = "--vram-budget: expects a number of GiB >= 0";
        } else
            ok = parse_int(a, v, 1, o.n_ctx, error);
        if (!ok) return std::nullopt;
    }
    if (o.models.empty()) {
        error = "no model given (-m MODEL)";
        return std::nullopt;
    }
    if (o.n_prompt == 0 && o.n_gen == 0) {
        error = "-p and -n are both 0: nothing to measure";
        return std::nullopt;
    }
    const int longest = o.n_prompt > o.n_gen ? o.n_prompt : o.n_gen;
    if (o.n_ctx == 0)
        o.n_ctx = o.n_prompt + o.n_gen + ctx_slack;
    else if (o.n_ctx < longest) {
        error = "-c " + std::to_string(o.n_ctx) + " is smaller than the longest test (" +
                std::to_string(longest) + " tokens)";
        return std::nullopt;
    }
    return o;
}

} // namespace pi::bench
