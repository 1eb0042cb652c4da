// pi-server: loads one model and serves it over HTTP to several clients at once
// (docs/server.md).
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <memory>
#include <thread>

#include "metrics.hpp"
#include "routes.hpp"
#include "scheduler.hpp"
#include "server_options.hpp"
#include "server_os.hpp"
#include "tool.h"

extern "C" const char tool_name[] = "pi-server";

namespace {

using namespace pi_server;

struct model_deleter {
    void operator()(pi_model* m) const noexcept { pi_model_free(m); }
};

pi_model_params model_params(const server_options& o) {
    pi_model_params mp = pi_model_default_params();
    mp.dense = o.dense ? 1 : 0;
    if (o.vram_budget_given) mp.vram_budget = o.vram_budget_gib * 1073741824.0;
    mp.reset_gpu_index = o.reset_gpu_index ? 1 : 0;
    mp.disable_gpu_index = o.disable_gpu_index ? 1 : 0;
    mp.offload_device = o.offload_device.empty() ? nullptr : o.offload_device.c_str();
    mp.activation_stats = o.activation_stats.empty() ? nullptr : o.activation_stats.c_str();
    mp.kv_n_ctx = o.scheduling.n_ctx;
    return mp;
}

// The default cache: min(n_ctx_train, 4096) positions for each slot.
int32_t default_n_ctx(const pi_model* model, int32_t n_slots) {
    pi_model_info info{};
    info.struct_size = sizeof info;
    int32_t per_slot = 4096;
    if (pi_model_info_get(model, &info) == PI_OK && info.n_ctx_train > 0)
        per_slot = std::min(per_slot, info.n_ctx_train);
    return per_slot * n_slots;
}

// The listening socket, which httplib keeps to itself.
class http_server : public httplib::Server {
  public:
    bool widen_listen_queue(int backlog) {
        return pi_server::widen_listen_queue(svr_sock_, backlog);
    }
};

// The first stop request drains: new requests get 503, the scheduler finishes what it has, the
// replies finish writing, then the listener stops.
class drainer {
  public:
    drainer(server_state& state, httplib::Server& http) : state_(state), http_(http) {}
    ~drainer() {
        if (thread_.joinable()) thread_.join();
    }
    drainer(const drainer&) = delete;
    drainer& operator=(const drainer&) = delete;

    void start() {
        tool_note("draining: finishing the requests in flight (a second stop request exits now)");
        state_.draining = true;
        thread_ = std::thread([this] {
            state_.jobs->drain();
            // The scheduler is done, but a reply may still be writing its last chunks: stopping
            // the listener now would cut them off.
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (state_.counters->in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            http_.stop();
        });
    }

  private:
    server_state& state_;
    httplib::Server& http_;
    std::thread thread_;
};

// The chat template the routes render with: --chat-template, else the model's, else chatml (as
// `powerinfer --chat` does) when the model has none that is recognised.
std::string chat_template_for(const pi_model* model, const std::string& asked) {
    char name[64];
    size_t len = 0;
    if (!asked.empty() || pi_chat_template_name(model, nullptr, name, sizeof name, &len) == PI_OK)
        return asked;
    tool_note("the model's chat template is not recognised (%s): using chatml", pi_last_error());
    return "chatml";
}

int serve(server_options o) {
    if (o.verbose) pi_log_set(tool_log_to_stderr, nullptr);
    const pi_model_params mp = model_params(o);
    pi_model* loaded = nullptr;
    if (const pi_status st = pi_model_load(o.model_path.c_str(), &mp, &loaded); st != PI_OK)
        return tool_fail_status("loading the model", st);
    std::unique_ptr<pi_model, model_deleter> model(loaded);
    o.chat_template = chat_template_for(model.get(), o.chat_template);

    scheduler_options scheduling = o.scheduling;
    if (scheduling.n_ctx == 0) scheduling.n_ctx = default_n_ctx(model.get(), scheduling.n_slots);
    std::unique_ptr<scheduler> jobs;
    try {
        jobs = std::make_unique<scheduler>(model.get(), scheduling);
    } catch (const std::exception& e) {
        return tool_fail(1, "%s", e.what());
    }

    metrics counters;
    server_state state;
    state.model = model.get();
    state.jobs = jobs.get();
    state.options = &o;
    state.counters = &counters;
    state.model_id = o.model_alias;
    state.created = static_cast<int64_t>(std::time(nullptr));

    http_server http;
    const size_t n_http = static_cast<size_t>(o.http_threads);
    http.new_task_queue = [n_http] { return new httplib::ThreadPool(n_http); };
    http.set_payload_max_length(o.max_body_bytes);
    const auto timeout_s = static_cast<time_t>(o.request_timeout_seconds);
    http.set_read_timeout(timeout_s, 0);
    http.set_write_timeout(timeout_s, 0);
    register_routes(http, state);

    int port = o.port;
    if (port == 0)
        port = http.bind_to_any_port(o.host);
    else if (!http.bind_to_port(o.host, port))
        port = -1;
    if (port < 0) return tool_fail(1, "cannot listen on %s:%d", o.host.c_str(), o.port);
    if (!http.widen_listen_queue(SOMAXCONN))
        tool_note("warning: the listen queue stays at httplib's 5 connections");
    tool_note("model %s: %d slots of %d positions, %d cache cells", o.model_alias.c_str(),
              jobs->n_slots(), jobs->n_ctx_per_slot(), scheduling.n_ctx);
    tool_note("listening on http://%s:%d", o.host.c_str(), port);
    {
        drainer drain(state, http);
        const stop_requests stops([&drain] { drain.start(); });
        if (!http.listen_after_bind()) {
            if (!state.draining) return tool_fail(1, "the HTTP server stopped unexpectedly");
        }
    }
    jobs.reset();
    tool_note("drained, exiting");
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    prepare_process();
    server_options options;
    if (const int rc = parse_server_options(argc, argv, &options); rc != 0) return rc;
    return serve(options);
}
