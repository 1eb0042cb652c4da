// pi-bench: llama-bench-style benchmark of libpowerinfer through its public API (bench/README.md).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "bandwidth.hpp"
#include "options.hpp"
#include "platform/console.h"
#include "powerinfer.h"
#include "report.hpp"
#include "runner.hpp"
#include "system.hpp"
#include "tool.h"

extern "C" const char tool_name[] = "pi-bench";

namespace {

using namespace pi::bench;

constexpr size_t min_probe_bytes = size_t{1} << 30;
// Large enough that caches hold a negligible part of the buffer.
constexpr size_t probe_cache_multiple = 4;
constexpr int probe_min_passes = 8;
constexpr double probe_min_seconds = 2.0;

// Progress lines only for a person watching; scripts see nothing but the one-line error.
bool show_progress() {
    return platform_is_terminal(stderr) != 0;
}

int fail(const std::string& reason) {
    return tool_fail(1, "%s", reason.c_str());
}

size_t probe_bytes() {
    return std::max(min_probe_bytes, probe_cache_multiple * last_level_cache_bytes());
}

bool probe_bandwidth(int threads, bandwidth_result& out) {
    if (show_progress())
        tool_note("measuring memory read bandwidth (%zu MiB, %d threads)", probe_bytes() >> 20,
                  threads);
    return measure_read_bandwidth(threads, probe_bytes(), probe_min_passes, probe_min_seconds, out);
}

std::string probe_failure() {
    return "cannot allocate " + std::to_string(probe_bytes() >> 20) +
           " MiB for the bandwidth probe (use --no-bandwidth)";
}

std::string first_line(const char* text) {
    const std::string all = text ? text : "";
    return all.substr(0, all.find('\n'));
}

std::string joined(int argc, char** argv) {
    std::string command;
    for (int i = 0; i < argc; ++i) {
        if (i) command += ' ';
        command += argv[i];
    }
    return command;
}

} // namespace

int main(int argc, char** argv) {
    const auto parsed = parse_options(argc, argv);
    if (!parsed) return 2;
    const options& o = *parsed;

    report r;
    r.date = today_utc();
    r.cpu = cpu_model_name();
    r.logical_cpus = logical_cpus();
    r.library = first_line(pi_system_info());
    r.command = joined(argc, argv);
    r.load_before = load_average();
    r.opts = o;

    if (o.bandwidth) {
        bandwidth_result bw;
        if (!probe_bandwidth(o.threads, bw)) return fail(probe_failure());
        r.bandwidth = bw;
    }

    for (const std::string& path : o.models) {
        for (const mode m : o.modes) {
            if (show_progress()) tool_note("%s, mode %s", path.c_str(), mode_name(m));
            run_result run;
            std::string message;
            switch (run_benchmark(path, m, o, run, message)) {
            case outcome::done:
                r.runs.push_back(std::move(run));
                break;
            case outcome::skipped:
                r.notes.push_back(message);
                continue;
            case outcome::failed:
                return fail(message);
            }
            // Probing again after every run (with the model unloaded) gives other load on the
            // machine several chances to pause; one busy probe would otherwise understate the
            // bandwidth for the whole report.
            if (o.bandwidth) {
                bandwidth_result again;
                if (!probe_bandwidth(o.threads, again)) return fail(probe_failure());
                keep_best(*r.bandwidth, again);
            }
        }
    }
    if (r.runs.empty()) return fail("nothing was measured: " + r.notes.front());

    if (o.json)
        print_json(r, stdout);
    else
        print_markdown(r, stdout);
    return std::fflush(stdout) == 0 ? 0 : fail("cannot write the report");
}
