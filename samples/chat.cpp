// chat.cpp — a multi-turn chat over the C API through C++ RAII handles. Replies stream as they
// are generated; Ctrl-C cancels the current reply, a second Ctrl-C (or EOF) ends the chat.
//
//   chat MODEL.gguf
#include <powerinfer.h>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

template <auto free_fn> struct deleter {
    template <typename T> void operator()(T* p) const { free_fn(p); }
};
using model_ptr = std::unique_ptr<pi_model, deleter<pi_model_free>>;
using context_ptr = std::unique_ptr<pi_context, deleter<pi_context_free>>;

void check(pi_status status, const char* what) {
    if (status < 0) throw std::runtime_error(std::string(what) + ": " + pi_last_error());
}

// Lock-free atomics and pi_context_cancel (an atomic store) are safe in a signal handler.
std::atomic<pi_context*> g_ctx{nullptr};
std::atomic<bool> g_replying{false}, g_quit{false};

extern "C" void on_sigint(int) {
    if (g_replying.exchange(false)) return pi_context_cancel(g_ctx.load());
    g_quit = true;
}

int print_piece(const char* text, size_t len, void* reply) {
    std::fwrite(text, 1, len, stdout);
    std::fflush(stdout);
    static_cast<std::string*>(reply)->append(text, len);
    return 1;
}

// pi_generate starts from an empty cache, so each turn sends the whole transcript; when it no
// longer fits, the chat starts over from the current turn.
pi_status reply_to(pi_context* ctx, std::string& transcript, const std::string& turn) {
    static const char* const stop[] = {"\nUser:"};
    pi_generate_params params = pi_generate_default_params();
    params.max_tokens = 128;
    params.stop = stop;
    params.n_stop = 1;
    params.callback = print_piece;
    std::string reply;
    params.user_data = &reply;
    transcript += turn;
    g_replying = true;
    pi_status status = pi_generate(ctx, transcript.c_str(), &params, nullptr);
    if (status == PI_ERR_CONTEXT_FULL && transcript != turn) {
        transcript = turn;
        status = pi_generate(ctx, transcript.c_str(), &params, nullptr);
    }
    g_replying = false;
    transcript += reply + "\n";
    return status;
}

} // namespace

int main(int argc, char** argv) try {
    if (argc != 2) throw std::runtime_error(std::string("usage: ") + argv[0] + " MODEL.gguf");
    pi_model* m = nullptr;
    check(pi_model_load(argv[1], nullptr, &m), "loading the model");
    const model_ptr model(m);
    pi_context_params ctx_params = pi_context_default_params();
    ctx_params.n_ctx = 2048;
    pi_context* c = nullptr;
    check(pi_context_create(model.get(), &ctx_params, &c), "creating the context");
    const context_ptr ctx(c);

    g_ctx = ctx.get();
    struct sigaction action = {};
    action.sa_handler = on_sigint; // no SA_RESTART: Ctrl-C at the prompt ends the read
    sigaction(SIGINT, &action, nullptr);
    std::string transcript, line;
    while (!g_quit && std::fputs("> ", stdout) >= 0 && std::fflush(stdout) == 0 &&
           std::getline(std::cin, line)) {
        const pi_status status = reply_to(ctx.get(), transcript, "User: " + line + "\nAssistant:");
        check(status, "generating");
        std::puts(status == PI_STATUS_CANCELLED ? " [cancelled]" : "");
    }
    std::puts("");
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "chat: %s\n", e.what());
    return 1;
}
