#include "server_options.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "tool_args.h"

namespace pi_server {

namespace {

const char usage[] =
    "usage: pi-server -m MODEL [options]\n"
    "\n"
    "An OpenAI-compatible HTTP server (docs/server.md): /v1/chat/completions, /v1/completions,\n"
    "/v1/models, /tokenize, /detokenize, /health, /metrics and a chat page at /.\n"
    "\n"
    "  -m,  --model PATH          PowerInfer GGUF model (required)\n"
    "  -a,  --alias NAME          model id in the API (default: the file name without .gguf)\n"
    "       --host ADDR           address to listen on (default 127.0.0.1)\n"
    "       --port N              port (default 8080; 0: any free port)\n"
    "  -np, --parallel N          slots: requests decoded together (default 1, at most 64)\n"
    "  -c,  --ctx-size N          KV cache cells in all, shared out evenly between the slots\n"
    "                             (default 0: min(n_ctx_train, 4096) for each slot)\n"
    "  -b,  --batch-size N        most tokens in one step (default 512)\n"
    "  -t,  --threads N           CPU threads (default: hardware threads, at most 4)\n"
    "  -n,  --n-predict N         max_tokens of requests that name none (default -1: until\n"
    "                             the slot's context is full)\n"
    "       --api-key KEY         require 'Authorization: Bearer KEY' (also $PI_API_KEY)\n"
    "       --chat-template NAME  chat template name or Jinja text (default: the model's)\n"
    "       --max-queue N         requests waiting for a slot before 429 (default 64)\n"
    "       --max-body-bytes N    largest request body before 413 (default 1048576)\n"
    "       --max-prompt-tokens N longest prompt before 413 (default 0: the slot's context)\n"
    "       --threads-http N      HTTP worker threads (default: max(32, 2 x slots + 8))\n"
    "       --timeout SECONDS     socket read and write timeout (default 600)\n"
    "       --verbose             the library's log lines on stderr\n"
    "  offloading (as `powerinfer`):\n"
    "       --vram-budget GIB     GPU memory for hot neurons and dense blocks\n"
    "       --offload-device DEV  auto, cuda, hip, none or cpu\n"
    "       --reset-gpu-index     ignore the cached <model>.generated.gpuidx and re-plan\n"
    "       --disable-gpu-index   keep every FFN neuron on the CPU\n"
    "       --activation-stats F  activation counts the planner places neurons by\n"
    "       --dense               compute every FFN neuron (no predictor)\n";

} // namespace

int parse_server_options(int argc, char** argv, server_options* o) {
    if (const char* key = std::getenv("PI_API_KEY")) o->api_key = key;
    tool_args a = tool_args_start(argc, argv, usage);
    const auto text = [&](std::string& out) {
        if (const char* value = tool_args_text(&a)) out = value;
    };
    int port = o->port;
    int64_t max_body = static_cast<int64_t>(o->max_body_bytes);
    while (tool_args_next(&a)) {
        if (tool_args_is(&a, "-m", "--model"))
            text(o->model_path);
        else if (tool_args_is(&a, "-a", "--alias"))
            text(o->model_alias);
        else if (tool_args_is(&a, NULL, "--host"))
            text(o->host);
        else if (tool_args_is(&a, NULL, "--port"))
            tool_args_int(&a, 0, 65535, &port);
        else if (tool_args_is(&a, "-np", "--parallel"))
            tool_args_int(&a, 1, PI_MAX_SEQUENCES, &o->scheduling.n_slots);
        else if (tool_args_is(&a, "-c", "--ctx-size"))
            tool_args_int(&a, 0, INT_MAX, &o->scheduling.n_ctx);
        else if (tool_args_is(&a, "-b", "--batch-size"))
            tool_args_int(&a, 1, INT_MAX, &o->scheduling.n_batch);
        else if (tool_args_is(&a, "-t", "--threads"))
            tool_args_int(&a, 1, 1024, &o->scheduling.n_threads);
        else if (tool_args_is(&a, "-n", "--n-predict"))
            tool_args_int(&a, -1, INT_MAX, &o->default_max_tokens);
        else if (tool_args_is(&a, NULL, "--api-key"))
            text(o->api_key);
        else if (tool_args_is(&a, NULL, "--chat-template"))
            text(o->chat_template);
        else if (tool_args_is(&a, NULL, "--max-queue"))
            tool_args_int(&a, 0, 1 << 20, &o->scheduling.max_queue);
        else if (tool_args_is(&a, NULL, "--max-body-bytes"))
            tool_args_int64(&a, 64, INT64_C(1) << 34, &max_body);
        else if (tool_args_is(&a, NULL, "--max-prompt-tokens"))
            tool_args_int(&a, 0, INT_MAX, &o->max_prompt_tokens);
        else if (tool_args_is(&a, NULL, "--threads-http"))
            tool_args_int(&a, 1, 1024, &o->http_threads);
        else if (tool_args_is(&a, NULL, "--timeout"))
            tool_args_double(&a, 1, 86400, &o->request_timeout_seconds);
        else if (tool_args_is(&a, NULL, "--verbose"))
            o->verbose = true;
        else if (tool_args_is(&a, NULL, "--vram-budget"))
            o->vram_budget_given =
                tool_args_double(&a, -HUGE_VAL, HUGE_VAL, &o->vram_budget_gib) != 0;
        else if (tool_args_is(&a, NULL, "--offload-device"))
            text(o->offload_device);
        else if (tool_args_is(&a, NULL, "--reset-gpu-index"))
            o->reset_gpu_index = true;
        else if (tool_args_is(&a, NULL, "--disable-gpu-index"))
            o->disable_gpu_index = true;
        else if (tool_args_is(&a, NULL, "--activation-stats"))
            text(o->activation_stats);
        else if (tool_args_is(&a, NULL, "--dense"))
            o->dense = true;
        else
            tool_args_unknown(&a);
    }
    if (o->model_path.empty()) tool_args_fail(&a, "-m: a model path is required");
    o->port = port;
    o->max_body_bytes = static_cast<size_t>(max_body);
    if (o->model_alias.empty() && !o->model_path.empty()) {
        const size_t slash = o->model_path.find_last_of('/');
        std::string name = o->model_path.substr(slash == std::string::npos ? 0 : slash + 1);
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0)
            name.resize(name.size() - 5);
        o->model_alias = name;
    }
    if (o->http_threads == 0) o->http_threads = std::max(32, 2 * o->scheduling.n_slots + 8);
    return tool_args_finish(&a);
}

} // namespace pi_server
