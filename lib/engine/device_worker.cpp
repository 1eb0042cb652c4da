#include "engine/device_worker.hpp"

#include "platform/thread_name.hpp"

#include <utility>

namespace pi {

device_worker::device_worker(job body) : body_(std::move(body)), thread_([this] { loop(); }) {}

device_worker::~device_worker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
}

void device_worker::loop() {
    platform::name_this_thread("pi-device");
    for (;;) {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return has_job_ || stopping_; });
        if (stopping_) return;
        lock.unlock();
        std::exception_ptr error;
        try {
            body_(layer_, n_tokens_);
        } catch (...) {
            error = std::current_exception();
        }
        const auto ended = std::chrono::steady_clock::now();
        lock.lock();
        finished_ = ended;
        error_ = error;
        has_job_ = false;
        lock.unlock();
        changed_.notify_all();
    }
}

void device_worker::start(size_t layer, int32_t n_tokens) {
    {
        std::lock_guard lock(mutex_);
        layer_ = layer;
        n_tokens_ = n_tokens;
        has_job_ = true;
    }
    changed_.notify_all();
}

void device_worker::wait() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !has_job_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

} // namespace pi
