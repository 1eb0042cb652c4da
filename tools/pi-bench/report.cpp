#include "report.hpp"

#include <cmath>
#include <string>

#include "json.hpp"
#include "report_conversation.hpp"
#include "report_format.hpp"

namespace pi::bench {

namespace {

// Numbers derived from a run and the measured bandwidth; NAN where they do not apply.
struct derived {
    double bytes_per_token = NAN;
    double limit_tokens_per_second = NAN; // bandwidth / bytes per token
    double percent_of_limit = NAN;        // tg median as a share of that limit
    double pp_over_tg = NAN;
    double memory_expected = 0; // file + KV cache
    double rss_over_expected = NAN;
};

derived derive(const report& r, const run_result& run) {
    derived d;
    if (run.tg && run.decode_tokens > 0) {
        d.bytes_per_token = run.bytes_per_token();
        if (r.bandwidth && d.bytes_per_token > 0) {
            d.limit_tokens_per_second = r.bandwidth->bytes_per_second / d.bytes_per_token;
            d.percent_of_limit = 100 * run.tg->tokens_per_second.median / d.limit_tokens_per_second;
        }
    }
    if (run.pp && run.tg && run.tg->tokens_per_second.median > 0)
        d.pp_over_tg = run.pp->tokens_per_second.median / run.tg->tokens_per_second.median;
    d.memory_expected = static_cast<double>(run.model.file_size + run.kv_cache_bytes);
    if (d.memory_expected > 0)
        d.rss_over_expected = static_cast<double>(run.peak_rss) / d.memory_expected;
    return d;
}

// tg median of sparse over dense for the same file, or NAN.
double sparse_over_dense(const report& r, const std::string& path) {
    double sparse = NAN, dense = NAN;
    for (const run_result& run : r.runs) {
        if (run.model.path != path || !run.tg) continue;
        (run.run_mode == mode::sparse ? sparse : dense) = run.tg->tokens_per_second.median;
    }
    return dense > 0 ? sparse / dense : NAN;
}

std::vector<std::string> distinct_paths(const report& r) {
    std::vector<std::string> paths;
    for (const run_result& run : r.runs) {
        bool seen = false;
        for (const std::string& p : paths)
            seen = seen || p == run.model.path;
        if (!seen) paths.push_back(run.model.path);
    }
    return paths;
}

void markdown_test_row(std::FILE* out, const run_result& run, const test_result& t,
                       const derived& d) {
    const bool tg = t.name == "tg";
    std::fprintf(
        out, "| %s | %s | %s | %s | %d | %s%d | %s | %s | %s | %s |\n",
        model_cell(run.model).c_str(),
        bytes_binary(static_cast<double>(run.model.file_size)).c_str(),
        count_si(static_cast<double>(run.model.n_params)).c_str(), mode_name(run.run_mode),
        run.threads, t.name.c_str(), t.n_tokens, speed(t.tokens_per_second).c_str(),
        tg ? fixed(d.bytes_per_token / 1e6, 1).c_str() : "-",
        tg ? fixed(d.limit_tokens_per_second, 2).c_str() : "-",
        tg ? (fixed(d.percent_of_limit, 1) + (std::isfinite(d.percent_of_limit) ? "%" : "")).c_str()
           : "-");
}

void json_number_or_null(json_writer& j, std::string_view key, double value) {
    j.key(key);
    j.number(value);
}

void json_test(json_writer& j, const test_result& t, const derived* d) {
    j.begin_object();
    j.key("test");
    j.string(t.name);
    j.key("n_tokens");
    j.integer(static_cast<uint64_t>(t.n_tokens));
    j.key("tokens_per_second");
    json_summary(j, t.tokens_per_second);
    if (d) {
        json_number_or_null(j, "bytes_per_token", d->bytes_per_token);
        json_number_or_null(j, "limit_tokens_per_second", d->limit_tokens_per_second);
        json_number_or_null(j, "percent_of_limit", d->percent_of_limit);
    }
    j.end_object();
}

void json_run(json_writer& j, const report& r, const run_result& run) {
    const derived d = derive(r, run);
    const model_facts& m = run.model;
    j.begin_object();
    j.key("model");
    j.begin_object();
    j.key("path");
    j.string(m.path);
    j.key("label");
    j.string(m.label);
    j.key("architecture");
    j.string(m.architecture);
    j.key("weight_type");
    j.string(m.weight_type);
    j.key("sparse_file");
    j.boolean(m.sparse_file);
    j.key("file_size");
    j.integer(m.file_size);
    j.key("n_params");
    j.integer(m.n_params);
    json_integers(j, {{"n_layer", m.n_layer},
                      {"n_embd", m.n_embd},
                      {"n_head", m.n_head},
                      {"n_head_kv", m.n_head_kv},
                      {"n_ff", m.n_ff},
                      {"n_vocab", m.n_vocab}});
    j.end_object();
    j.key("mode");
    j.string(mode_name(run.run_mode));
    j.key("threads");
    j.integer(static_cast<uint64_t>(run.threads));
    j.key("n_ctx");
    j.integer(static_cast<uint64_t>(run.n_ctx));
    j.key("n_batch");
    j.integer(static_cast<uint64_t>(run.n_batch));
    j.key("tests");
    j.begin_array();
    if (run.pp) json_test(j, *run.pp, nullptr);
    if (run.tg) json_test(j, *run.tg, &d);
    j.end_array();
    j.key("decode_bytes");
    j.integer(run.decode_bytes);
    j.key("decode_tokens");
    j.integer(run.decode_tokens);
    json_number_or_null(j, "ffn_active_fraction", run.tg ? run.ffn_active_fraction : NAN);
    json_number_or_null(j, "pp_over_tg", d.pp_over_tg);
    j.key("memory");
    j.begin_object();
    j.key("peak_rss_bytes");
    j.integer(run.peak_rss);
    j.key("peak_rss_of_run_only");
    j.boolean(run.peak_rss_of_run_only);
    j.key("file_bytes");
    j.integer(m.file_size);
    j.key("kv_cache_bytes");
    j.integer(run.kv_cache_bytes);
    j.key("expected_bytes");
    j.integer(m.file_size + run.kv_cache_bytes);
    json_number_or_null(j, "rss_over_expected", d.rss_over_expected);
    j.end_object();
    j.key("offload");
    if (run.offload.device.empty()) {
        j.null();
    } else {
        const offload_facts& f = run.offload;
        j.begin_object();
        j.key("device");
        j.string(f.device);
        json_integers(j, {{"bytes", f.bytes},
                          {"attn_layers", f.attn_layers},
                          {"predictor_layers", f.predictor_layers},
                          {"kv_n_ctx", f.kv_n_ctx}});
        j.key("output");
        j.boolean(f.output);
        json_number_or_null(j, "hot_fraction", f.hot_fraction);
        // Over the timed tg runs (single-token batches): what crossed between the host and the
        // device, and how long each side of the hybrid layers waited.
        json_integers(j, {{"decode_bytes_to_device", run.decode_bytes_to_device},
                          {"decode_bytes_to_host", run.decode_bytes_to_host},
                          {"decode_downloads", run.decode_downloads},
                          {"decode_device_kernels", run.decode_device_kernels},
                          {"decode_device_launches", run.decode_device_launches}});
        json_number_or_null(j, "cpu_wait_seconds", run.tg ? run.cpu_wait_seconds : NAN);
        json_number_or_null(j, "device_wait_seconds", run.tg ? run.device_wait_seconds : NAN);
        j.end_object();
    }
    json_conversation(j, run);
    j.end_object();
}

} // namespace

void print_markdown(const report& r, std::FILE* out) {
    std::fprintf(out, "## pi-bench %s\n\n", r.date.c_str());
    std::fprintf(out, "- CPU: %s (%u logical CPUs)\n", r.cpu.c_str(), r.logical_cpus);
    std::fprintf(out, "- library: %s\n", r.library.c_str());
    if (r.bandwidth)
        std::fprintf(out,
                     "- memory read bandwidth: %.2f GB/s (%d threads, %s buffer, best of %d "
                     "passes in %d probes, before and after each run)\n",
                     r.bandwidth->bytes_per_second / 1e9, r.bandwidth->threads,
                     bytes_binary(static_cast<double>(r.bandwidth->buffer_bytes)).c_str(),
                     r.bandwidth->passes, r.bandwidth->probes);
    else
        std::fputs("- memory read bandwidth: not measured (--no-bandwidth)\n", out);
    std::fprintf(out, "- command: `%s`\n", r.command.c_str());
    if (!r.load_before.empty())
        std::fprintf(out, "- load average (1, 5, 15 min) at the start: %s\n",
                     r.load_before.c_str());
    std::fprintf(out,
                 "- %d timed repetition(s) after %d warm-up run(s); t/s is median ± stddev\n\n",
                 r.opts.repetitions, r.opts.warmup);

    std::fputs("| model | size | params | mode | threads | test | t/s | MB/token | limit t/s "
               "| % of limit |\n",
               out);
    std::fputs("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |\n", out);
    for (const run_result& run : r.runs) {
        const derived d = derive(r, run);
        if (run.pp) markdown_test_row(out, run, *run.pp, d);
        if (run.tg) markdown_test_row(out, run, *run.tg, d);
    }

    bool over_limit = false;
    for (const run_result& run : r.runs)
        over_limit = over_limit || derive(r, run).percent_of_limit > 100;
    if (over_limit)
        std::fputs("\nAbove 100% of the limit: the bandwidth probe was slowed by other load on the "
                   "machine, or the bytes of a token stayed in the CPU caches.\n",
                   out);

    std::fputs("\n| model | mode | FFN neurons computed | pp/tg | peak RSS | file + KV cache | "
               "RSS / (file + KV) |\n",
               out);
    std::fputs("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n", out);
    for (const run_result& run : r.runs) {
        const derived d = derive(r, run);
        std::fprintf(out, "| %s | %s | %s | %s | %s | %s + %s | %s |\n",
                     model_cell(run.model).c_str(), mode_name(run.run_mode),
                     run.tg ? (fixed(100 * run.ffn_active_fraction, 1) + "%").c_str() : "-",
                     fixed(d.pp_over_tg, 2).c_str(),
                     bytes_binary(static_cast<double>(run.peak_rss)).c_str(),
                     bytes_binary(static_cast<double>(run.model.file_size)).c_str(),
                     bytes_binary(static_cast<double>(run.kv_cache_bytes)).c_str(),
                     fixed(d.rss_over_expected, 2).c_str());
    }

    bool any_offload = false;
    for (const run_result& run : r.runs)
        any_offload = any_offload || !run.offload.device.empty();
    if (any_offload) {
        std::fputs(
            "\n| model | mode | offload device | on the device | attention layers | predictors | "
            "output | KV cache | FFN neurons | crossing per token (to device / to host) | "
            "downloads per token | waits per token (CPU / device) | device kernels / "
            "submissions per token |\n",
            out);
        std::fputs("| --- | --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: "
                   "| ---: |\n",
                   out);
        for (const run_result& run : r.runs) {
            const offload_facts& f = run.offload;
            if (f.device.empty()) {
                std::fprintf(out, "| %s | %s | none | - | - | - | - | - | - | - | - | - | - |\n",
                             model_cell(run.model).c_str(), mode_name(run.run_mode));
                continue;
            }
            const bool tg = run.tg && run.decode_tokens > 0;
            const std::string crossing =
                tg ? bytes_binary(
                         run.per_decode_token(static_cast<double>(run.decode_bytes_to_device))) +
                         " / " +
                         bytes_binary(
                             run.per_decode_token(static_cast<double>(run.decode_bytes_to_host)))
                   : "-";
            const std::string waits =
                tg ? fixed(1e6 * run.per_decode_token(run.cpu_wait_seconds), 0) + " / " +
                         fixed(1e6 * run.per_decode_token(run.device_wait_seconds), 0) + " us"
                   : "-";
            const std::string submissions =
                tg && run.decode_device_kernels > 0
                    ? fixed(run.per_decode_token(static_cast<double>(run.decode_device_kernels)),
                            0) +
                          " / " +
                          fixed(
                              run.per_decode_token(static_cast<double>(run.decode_device_launches)),
                              1)
                    : "-";
            std::fprintf(
                out, "| %s | %s | %s | %s | %d/%d | %d/%d | %s | %s | %s | %s | %s | %s | %s |\n",
                model_cell(run.model).c_str(), mode_name(run.run_mode), f.device.c_str(),
                bytes_binary(static_cast<double>(f.bytes)).c_str(), f.attn_layers,
                run.model.n_layer, f.predictor_layers, run.model.n_layer, f.output ? "yes" : "no",
                f.kv_n_ctx > 0 ? (std::to_string(f.kv_n_ctx) + " cells").c_str() : "host",
                (fixed(100 * f.hot_fraction, 1) + "%").c_str(), crossing.c_str(),
                tg ? fixed(run.per_decode_token(static_cast<double>(run.decode_downloads)), 1)
                         .c_str()
                   : "-",
                waits.c_str(), submissions.c_str());
        }
    }

    markdown_parallel(r, out);
    markdown_chat_turns(r, out);

    bool header = false;
    for (const std::string& path : distinct_paths(r)) {
        const double ratio = sparse_over_dense(r, path);
        if (!std::isfinite(ratio)) continue;
        if (!header) std::fputc('\n', out);
        header = true;
        std::string label;
        for (const run_result& run : r.runs)
            if (run.model.path == path) label = run.model.label;
        std::fprintf(out, "- %s: sparse tg / dense tg = %.2f\n", label.c_str(), ratio);
    }
    if (!r.notes.empty()) std::fputc('\n', out);
    for (const std::string& note : r.notes)
        std::fprintf(out, "- note: %s\n", note.c_str());
}

void print_json(const report& r, std::FILE* out) {
    json_writer j(out);
    j.begin_object();
    j.key("date");
    j.string(r.date);
    j.key("cpu");
    j.string(r.cpu);
    j.key("logical_cpus");
    j.integer(r.logical_cpus);
    j.key("library");
    j.string(r.library);
    j.key("command");
    j.string(r.command);
    j.key("load_average");
    j.string(r.load_before);
    j.key("settings");
    j.begin_object();
    json_integers(j, {{"n_prompt", r.opts.n_prompt},
                      {"n_gen", r.opts.n_gen},
                      {"repetitions", r.opts.repetitions},
                      {"warmup", r.opts.warmup},
                      {"threads", r.opts.threads},
                      {"n_ctx", r.opts.n_ctx},
                      {"parallel", r.opts.parallel},
                      {"chat_turns", r.opts.chat_turns}});
    j.end_object();
    j.key("bandwidth");
    if (r.bandwidth) {
        j.begin_object();
        j.key("bytes_per_second");
        j.number(r.bandwidth->bytes_per_second);
        j.key("gb_per_second");
        j.number(r.bandwidth->bytes_per_second / 1e9);
        j.key("buffer_bytes");
        j.integer(r.bandwidth->buffer_bytes);
        j.key("passes");
        j.integer(static_cast<uint64_t>(r.bandwidth->passes));
        j.key("probes");
        j.integer(static_cast<uint64_t>(r.bandwidth->probes));
        j.key("threads");
        j.integer(static_cast<uint64_t>(r.bandwidth->threads));
        j.end_object();
    } else {
        j.null();
    }
    j.key("runs");
    j.begin_array();
    for (const run_result& run : r.runs)
        json_run(j, r, run);
    j.end_array();
    j.key("sparse_over_dense_tg");
    j.begin_array();
    for (const std::string& path : distinct_paths(r)) {
        const double ratio = sparse_over_dense(r, path);
        if (!std::isfinite(ratio)) continue;
        j.begin_object();
        j.key("model");
        j.string(path);
        j.key("ratio");
        j.number(ratio);
        j.end_object();
    }
    j.end_array();
    j.key("notes");
    j.begin_array();
    for (const std::string& note : r.notes)
        j.string(note);
    j.end_array();
    j.end_object();
}

} // namespace pi::bench
