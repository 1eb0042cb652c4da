#include "server_os.hpp"

#include <windows.h>

#include <cstdlib>
#include <mutex>
#include <utility>

#include "tool.h"

namespace pi_server {

namespace {

std::mutex active_mutex;
stop_requests::watcher* active = nullptr;

} // namespace

// Windows runs a console control handler on a thread of its own, one event at a time.
struct stop_requests::watcher {
    explicit watcher(std::function<void()> first) : on_first(std::move(first)) {
        std::lock_guard lock(active_mutex);
        active = this;
        SetConsoleCtrlHandler(handle, TRUE);
    }
    ~watcher() {
        SetConsoleCtrlHandler(handle, FALSE);
        std::lock_guard lock(active_mutex);
        active = nullptr;
    }

    static BOOL WINAPI handle(DWORD event) {
        switch (event) {
        case CTRL_C_EVENT:
        case CTRL_BREAK_EVENT:
        case CTRL_CLOSE_EVENT:
        case CTRL_SHUTDOWN_EVENT:
            break;
        default:
            return FALSE;
        }
        std::lock_guard lock(active_mutex);
        if (active == nullptr) return FALSE;
        if (active->stopping) {
            tool_note("second stop request: exiting without draining");
            std::_Exit(1);
        }
        active->stopping = true;
        active->on_first();
        return TRUE;
    }

    std::function<void()> on_first;
    bool stopping = false;
};

void prepare_process() {}

stop_requests::stop_requests(std::function<void()> on_first)
    : watcher_(std::make_unique<watcher>(std::move(on_first))) {}

stop_requests::~stop_requests() = default;

bool widen_listen_queue(socket_t, int) {
    return true;
}

} // namespace pi_server
