#include "server_os.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <utility>

#include "tool.h"

namespace pi_server {

namespace {

// SIGUSR1 tells the watching thread that the watch is over.
sigset_t watched_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    return set;
}

} // namespace

// One thread takes the signals with sigwait.
struct stop_requests::watcher {
    explicit watcher(std::function<void()> first) : on_first(std::move(first)) {
        thread = std::thread([this] { watch(); });
    }
    ~watcher() {
        done = true;
        pthread_kill(thread.native_handle(), SIGUSR1);
        thread.join();
    }

    void watch() {
        const sigset_t set = watched_signals();
        bool stopping = false;
        for (;;) {
            int sig = 0;
            if (sigwait(&set, &sig) != 0 || done) return;
            if (sig == SIGUSR1) continue;
            if (stopping) {
                tool_note("second signal: exiting without draining");
                _exit(1);
            }
            stopping = true;
            on_first();
        }
    }

    std::function<void()> on_first;
    std::atomic<bool> done{false};
    std::thread thread;
};

void prepare_process() {
    const sigset_t set = watched_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

stop_requests::stop_requests(std::function<void()> on_first)
    : watcher_(std::make_unique<watcher>(std::move(on_first))) {}

stop_requests::~stop_requests() = default;

bool widen_listen_queue(socket_t sock, int backlog) {
    return ::listen(sock, backlog) == 0;
}

} // namespace pi_server
