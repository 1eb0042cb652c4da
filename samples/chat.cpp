// chat.cpp — a multi-turn chat over the C API through C++ RAII handles. The messages go through
// the chat template, and the context keeps the conversation: each turn sends the whole transcript
// and pi_generate decodes only what the cache does not hold yet. Replies stream as they are
// generated; Ctrl-C cancels the current reply, a second Ctrl-C (or EOF) ends the chat.
//
//   chat MODEL.gguf [TEMPLATE]    TEMPLATE: chatml, llama2, llama3, ... (default: the model's)
#include <powerinfer.h>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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
#if defined(_WIN32)
    signal(SIGINT, on_sigint); // the C runtime reset it to the default before this call
#endif
    if (g_replying.exchange(false)) return pi_context_cancel(g_ctx.load());
    g_quit = true;
}

int print_piece(const char* text, size_t len, void* reply) {
    std::fwrite(text, 1, len, stdout);
    std::fflush(stdout);
    static_cast<std::string*>(reply)->append(text, len);
    return 1;
}

struct message {
    std::string role, content;
};

// The template to use: the model's, or chatml when the model names none (a synthetic model).
std::string choose_template(const pi_model* model, const char* wanted) {
    char name[64];
    size_t len = 0;
    if (pi_chat_template_name(model, wanted, name, sizeof name, &len) == PI_OK) return name;
    if (wanted) throw std::runtime_error(std::string("the chat template: ") + pi_last_error());
    std::fprintf(stderr, "chat: %s; using chatml\n", pi_last_error());
    return "chatml";
}

std::string render(const pi_model* model, const std::string& tmpl,
                   const std::vector<message>& messages) {
    std::vector<pi_chat_message> list;
    for (const message& m : messages)
        list.push_back({m.role.c_str(), m.content.c_str()});
    std::string text(256, '\0');
    size_t len = 0;
    pi_status status = pi_chat_apply_template(model, tmpl.c_str(), list.data(), list.size(), 1,
                                              text.data(), text.size() + 1, &len);
    if (status == PI_ERR_INVALID_ARGUMENT && len > text.size()) {
        text.resize(len);
        status = pi_chat_apply_template(model, tmpl.c_str(), list.data(), list.size(), 1,
                                        text.data(), text.size() + 1, &len);
    }
    check(status, "applying the chat template");
    text.resize(len);
    return text;
}

// The template writes BOS as text; it must then not be added a second time.
bool starts_with_bos(const pi_model* model, const std::string& text) {
    char piece[64];
    size_t len = 0;
    const pi_token bos = pi_token_bos(model);
    return bos >= 0 && pi_token_to_piece(model, bos, piece, sizeof piece, &len) == PI_OK &&
           len > 0 && len <= sizeof piece && text.compare(0, len, piece, len) == 0;
}

// One reply to the last user message. When the transcript no longer fits the context, its oldest
// exchanges are dropped (the cache then keeps only the prefix that still matches).
pi_status reply_to(pi_context* ctx, const pi_model* model, const std::string& tmpl,
                   std::vector<message>& messages, std::string& reply, pi_generate_result& result) {
    pi_generate_params params = pi_generate_default_params();
    params.max_tokens = 128;
    params.callback = print_piece;
    params.user_data = &reply;
    params.reuse_cache = 1;   // keep the cached transcript, decode only the new tokens
    params.parse_special = 1; // the template's markers are control tokens
    while (true) {
        const std::string prompt = render(model, tmpl, messages);
        params.add_bos = starts_with_bos(model, prompt) ? 0 : 1;
        reply.clear();
        g_replying = true;
        const pi_status status = pi_generate(ctx, prompt.c_str(), &params, &result);
        g_replying = false;
        if (status != PI_ERR_CONTEXT_FULL || messages.size() < 3) return status;
        messages.erase(messages.begin(), messages.begin() + 2);
    }
}

} // namespace

int main(int argc, char** argv) try {
    if (argc != 2 && argc != 3)
        throw std::runtime_error(std::string("usage: ") + argv[0] + " MODEL.gguf [TEMPLATE]");
    pi_model* m = nullptr;
    check(pi_model_load(argv[1], nullptr, &m), "loading the model");
    const model_ptr model(m);
    pi_context_params ctx_params = pi_context_default_params();
    ctx_params.n_ctx = 2048;
    pi_context* c = nullptr;
    check(pi_context_create(model.get(), &ctx_params, &c), "creating the context");
    const context_ptr ctx(c);
    const std::string tmpl = choose_template(model.get(), argc == 3 ? argv[2] : nullptr);

    g_ctx = ctx.get();
#if defined(_WIN32)
    signal(SIGINT, on_sigint); // the console's read ends on Ctrl-C
#else
    struct sigaction action = {};
    action.sa_handler = on_sigint; // no SA_RESTART: Ctrl-C at the prompt ends the read
    sigaction(SIGINT, &action, nullptr);
#endif
    std::vector<message> messages;
    std::string line, reply;
    while (!g_quit && std::fputs("> ", stdout) >= 0 && std::fflush(stdout) == 0 &&
           std::getline(std::cin, line)) {
        messages.push_back({"user", line});
        pi_generate_result result = {};
        result.struct_size = sizeof result;
        const pi_status status = reply_to(ctx.get(), model.get(), tmpl, messages, reply, result);
        check(status, "generating");
        std::puts(status == PI_STATUS_CANCELLED ? " [cancelled]" : "");
        messages.push_back({"assistant", reply});
        std::fprintf(stderr, "prompt: %d new tokens (%d cached)\n",
                     result.n_prompt_tokens - result.n_cached_tokens, result.n_cached_tokens);
    }
    std::puts("");
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "chat: %s\n", e.what());
    return 1;
}
