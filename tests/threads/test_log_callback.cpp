// pi_log_set from another thread while models load and a context generates: every message reaches
// the callback installed with its own user_data, and a replaced callback is never called again.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "threads_support.hpp"

using namespace threads_test;

namespace {

struct log_target {
    std::atomic<bool> installed{false};
    std::atomic<int> messages{0};
    std::atomic<int> calls_while_replaced{0};
};

void count_message(pi_log_level, const char*, void* user_data) {
    auto* t = static_cast<log_target*>(user_data);
    ++t->messages;
    if (!t->installed.load()) ++t->calls_while_replaced;
}

void install(log_target* target) {
    target->installed = true;
    pi_log_set(&count_message, target);
}

// Replaces `current` by `next` (nullptr: the default sink); `current` is retired once
// pi_log_set has returned.
void replace(log_target* current, log_target* next) {
    if (next) {
        install(next);
    } else {
        pi_log_set(nullptr, nullptr);
    }
    if (current) current->installed = false;
}

std::string generate_greedy(pi_context* ctx, const char* prompt) {
    std::string text;
    pi_generate_params gp = pi_generate_default_params();
    gp.max_tokens = 8;
    gp.temperature = 0.0f;
    gp.reuse_cache = 0;
    gp.callback = [](const char* t, size_t len, void* u) {
        static_cast<std::string*>(u)->append(t, len);
        return 1;
    };
    gp.user_data = &text;
    if (pi_generate(ctx, prompt, &gp, nullptr) != PI_OK) return "(failed)";
    return text;
}

} // namespace

TEST_CASE("the log callback changes from another thread while generation runs") {
    const model_handle m(tiny_model(13));
    const char* prompt = "And the earth was without form";
    std::string reference;
    {
        const context_handle c(m.model, 1);
        reference = generate_greedy(c.ctx, prompt);
    }

    std::atomic<bool> done{false};
    std::atomic<int> models_loaded{0};
    std::vector<std::string> texts;
    const context_handle generating(m.model, 2);
    // Generates until a few models have loaded (and logged) meanwhile.
    std::thread generator([&] {
        while (texts.size() < 4 || models_loaded.load() < 3)
            texts.push_back(generate_greedy(generating.ctx, prompt));
        done = true;
    });
    // Loading a model logs (that no GPU backend is active), so messages flow while the sink
    // changes.
    const std::string path = tiny_model(13);
    std::thread logger([&] {
        while (!done.load()) {
            pi_model* loaded = nullptr;
            if (pi_model_load(path.c_str(), nullptr, &loaded) == PI_OK) ++models_loaded;
            pi_model_free(loaded);
        }
    });
    log_target a, b;
    log_target* current = nullptr;
    for (int i = 0; !done.load(); ++i) {
        log_target* next = i % 3 == 0 ? &a : i % 3 == 1 ? &b : nullptr;
        replace(current, next);
        current = next;
        std::this_thread::yield();
    }
    generator.join();
    logger.join();
    replace(current, nullptr);

    CHECK(a.calls_while_replaced == 0);
    CHECK(b.calls_while_replaced == 0);
    CHECK(models_loaded > 0);
    for (const std::string& text : texts)
        CHECK(text == reference);

    // The sink works as before once the switching stops.
    log_target after;
    install(&after);
    { const model_handle loaded(path); }
    replace(&after, nullptr);
    CHECK(after.messages > 0);
}
