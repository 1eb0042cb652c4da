#include "runner.hpp"

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "powerinfer.h"
#include "system.hpp"
#include "tool.h"

namespace pi::bench {

namespace {

using model_ptr = std::unique_ptr<pi_model, decltype(&pi_model_free)>;
using context_ptr = std::unique_ptr<pi_context, decltype(&pi_context_free)>;

// Every run of every mode sees the same token stream, so sparse and dense are comparable.
constexpr uint32_t token_seed = 1234;

std::string label_of(const std::string& path) {
    std::string name = path.substr(path.find_last_of('/') + 1);
    const std::string ext = ".gguf";
    if (name.size() > ext.size() && name.ends_with(ext)) name.resize(name.size() - ext.size());
    return name;
}

model_facts facts_of(const std::string& path, const pi_model_info& info) {
    model_facts f;
    f.path = path;
    f.label = label_of(path);
    f.architecture = info.architecture;
    f.weight_type = info.weight_type;
    f.file_size = info.file_size;
    f.n_params = info.n_params;
    f.n_layer = info.n_layer;
    f.n_embd = info.n_embd;
    f.n_head = info.n_head;
    f.n_head_kv = info.n_head_kv;
    f.n_ff = info.n_ff;
    f.n_vocab = info.n_vocab;
    f.sparse_file = info.sparse != 0;
    return f;
}

class token_source {
  public:
    explicit token_source(int32_t n_vocab) : dist_(0, n_vocab - 1) {}
    pi_token next() { return dist_(rng_); }

  private:
    std::mt19937 rng_{token_seed};
    std::uniform_int_distribution<pi_token> dist_;
};

bool decode_failed(const char* test, pi_status status, std::string& message) {
    if (status == PI_OK) return false;
    message = std::string(test) + ": pi_decode: " + pi_status_str(status) + ": " + pi_last_error();
    return true;
}

// llama-bench's pp: an empty cache, then the whole prompt in one batch.
bool prompt_run(pi_context* ctx, token_source& tokens, int n, double& seconds,
                std::string& message) {
    std::vector<pi_token> prompt(static_cast<size_t>(n));
    for (pi_token& t : prompt)
        t = tokens.next();
    pi_kv_truncate(ctx, 0);
    const pi_batch batch{n, prompt.data(), nullptr, nullptr};
    const double start = tool_seconds();
    const pi_status status = pi_decode(ctx, &batch);
    seconds = tool_seconds() - start;
    return !decode_failed("pp", status, message);
}

// llama-bench's tg: an empty cache, then n single-token batches from position 0.
bool generation_run(pi_context* ctx, token_source& tokens, int n, double& seconds,
                    std::string& message) {
    pi_kv_truncate(ctx, 0);
    const double start = tool_seconds();
    for (int i = 0; i < n; ++i) {
        const pi_token token = tokens.next();
        const pi_batch batch{1, &token, nullptr, nullptr};
        if (decode_failed("tg", pi_decode(ctx, &batch), message)) return false;
    }
    seconds = tool_seconds() - start;
    return true;
}

using run_fn = bool (*)(pi_context*, token_source&, int, double&, std::string&);

// Warm-up runs, then timed ones; tokens/s of each timed run.
bool measure(run_fn run, pi_context* ctx, token_source& tokens, int n, const options& o,
             std::vector<double>& tokens_per_second, std::string& message) {
    double seconds = 0;
    for (int i = 0; i < o.warmup; ++i)
        if (!run(ctx, tokens, n, seconds, message)) return false;
    if (run == generation_run) pi_context_stats_reset(ctx);
    for (int i = 0; i < o.repetitions; ++i) {
        if (!run(ctx, tokens, n, seconds, message)) return false;
        tokens_per_second.push_back(seconds > 0 ? n / seconds : 0);
    }
    return true;
}

offload_facts offload_of(const pi_model_info& info) {
    offload_facts f;
    f.device = info.offload_device;
    if (f.device.empty()) return f;
    f.bytes = info.offload_bytes;
    uint64_t hot = 0;
    for (int il = 0; il < info.n_layer && il < PI_MAX_LAYERS; ++il) {
        f.attn_layers += info.attn_on_device[il];
        f.predictor_layers += info.predictor_on_device[il];
        hot += static_cast<uint64_t>(info.hot_neurons[il]);
    }
    f.output = info.output_on_device != 0;
    f.kv_n_ctx = info.kv_n_ctx_on_device;
    const double all = static_cast<double>(info.n_ff) * static_cast<double>(info.n_layer);
    f.hot_fraction = all > 0 ? static_cast<double>(hot) / all : 0;
    return f;
}

} // namespace

outcome run_benchmark(const std::string& path, mode m, const options& o, run_result& out,
                      std::string& message) {
    out.peak_rss_of_run_only = reset_peak_rss();

    pi_model_params mp = pi_model_default_params();
    mp.dense = m == mode::dense ? 1 : 0;
    if (o.vram_budget_gib >= 0) mp.vram_budget = o.vram_budget_gib * 1073741824.0;
    if (!o.offload_device.empty()) mp.offload_device = o.offload_device.c_str();
    mp.kv_n_ctx = o.n_ctx; // the benchmark's context may keep its KV cache on the device
    pi_model* raw_model = nullptr;
    const pi_status load = pi_model_load(path.c_str(), &mp, &raw_model);
    model_ptr model(raw_model, pi_model_free);
    if (load != PI_OK) {
        message = "cannot load " + path + ": " + pi_status_str(load) + ": " + pi_last_error();
        return outcome::failed;
    }
    pi_model_info info{};
    info.struct_size = sizeof info;
    if (pi_model_info_get(model.get(), &info) != PI_OK) {
        message = "pi_model_info_get(" + path + "): " + pi_last_error();
        return outcome::failed;
    }
    out.model = facts_of(path, info);
    out.offload = offload_of(info);
    out.run_mode = m;
    if (m == mode::sparse && !info.sparse) {
        message = path + " is a dense file: only mode dense applies";
        return outcome::skipped;
    }

    pi_context_params cp = pi_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_batch = std::max(1, o.n_prompt);
    cp.n_threads = o.threads;
    pi_context* raw_ctx = nullptr;
    const pi_status created = pi_context_create(model.get(), &cp, &raw_ctx);
    context_ptr ctx(raw_ctx, pi_context_free);
    if (created != PI_OK) {
        message =
            "pi_context_create(" + path + "): " + pi_status_str(created) + ": " + pi_last_error();
        return outcome::failed;
    }
    out.threads = o.threads;
    out.n_ctx = pi_context_n_ctx(ctx.get());
    out.n_batch = cp.n_batch;
    const uint64_t head_dim = static_cast<uint64_t>(info.n_embd / info.n_head);
    out.kv_cache_bytes = 2ull * static_cast<uint64_t>(info.n_layer) *
                         static_cast<uint64_t>(out.n_ctx) * static_cast<uint64_t>(info.n_head_kv) *
                         head_dim * 2;

    token_source tokens(info.n_vocab);
    if (o.n_prompt > 0) {
        std::vector<double> tps;
        if (!measure(prompt_run, ctx.get(), tokens, o.n_prompt, o, tps, message))
            return outcome::failed;
        out.pp = test_result{"pp", o.n_prompt, summarize(tps)};
    }
    if (o.n_gen > 0) {
        std::vector<double> tps;
        if (!measure(generation_run, ctx.get(), tokens, o.n_gen, o, tps, message))
            return outcome::failed;
        out.tg = test_result{"tg", o.n_gen, summarize(tps)};
        pi_context_stats stats{};
        stats.struct_size = sizeof stats;
        if (pi_context_stats_get(ctx.get(), &stats) != PI_OK) {
            message = std::string("pi_context_stats_get: ") + pi_last_error();
            return outcome::failed;
        }
        out.decode_bytes = stats.decode_bytes;
        out.decode_tokens = stats.n_decode_tokens;
        out.ffn_active_fraction = stats.ffn_active_fraction;
        out.decode_bytes_to_device = stats.decode_bytes_to_device;
        out.decode_bytes_to_host = stats.decode_bytes_to_host;
        out.decode_downloads = stats.decode_downloads;
        out.cpu_wait_seconds = stats.cpu_wait_seconds;
        out.device_wait_seconds = stats.device_wait_seconds;
        out.decode_device_kernels = stats.decode_device_kernels;
        out.decode_device_launches = stats.decode_device_launches;
    }
    ctx.reset(); // the next tests make contexts of their own
    if (o.parallel > 1) {
        out.parallel.emplace();
        if (!measure_parallel(model.get(), o, *out.parallel, message)) return outcome::failed;
    }
    if (o.chat_turns > 0 && !measure_chat(model.get(), o, out.chat_turns, message))
        return outcome::failed;
    out.peak_rss = peak_rss_bytes();
    return outcome::done;
}

} // namespace pi::bench
