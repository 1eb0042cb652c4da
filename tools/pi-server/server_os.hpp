#pragma once
// What pi-server asks of the operating system: stop requests and the listen queue, in
// server_os_posix.cpp and server_os_win32.cpp.
#include <httplib.h>

#include <functional>
#include <memory>

namespace pi_server {

// Before any thread starts. POSIX: SIGINT and SIGTERM blocked in every thread (stop_requests
// takes them), SIGPIPE ignored (a client gone mid-write is an error return, not a death).
void prepare_process();

// Ctrl+C, SIGINT or SIGTERM (POSIX), or the console's Ctrl+C, Ctrl+Break, close and shutdown
// events (Windows): the first calls on_first, which must return soon; a second ends the process
// at once. Watches from construction to destruction.
class stop_requests {
  public:
    explicit stop_requests(std::function<void()> on_first);
    ~stop_requests();
    stop_requests(const stop_requests&) = delete;
    stop_requests& operator=(const stop_requests&) = delete;

    struct watcher;

  private:
    std::unique_ptr<watcher> watcher_;
};

// A listening socket's queue set to backlog connections (socket_t is httplib's, global).
// Debian's httplib is a compiled library whose socket queues 5: a burst of clients overflows it,
// and the kernel drops their SYNs or falls back to SYN cookies, under which a connection can be
// reset. Linux and the BSDs take a second listen() as a new queue length; on Windows the
// header-only httplib is built with its queue (CPPHTTPLIB_LISTEN_BACKLOG), and this does nothing.
bool widen_listen_queue(socket_t sock, int backlog);

} // namespace pi_server
