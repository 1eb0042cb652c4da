#pragma once
// A thread that runs one job at a time for the caller, so that the offload device's half of a
// layer runs while the caller's thread computes the CPU's half. The job's body is fixed at
// construction; each start() hands it a layer and a token count, so starting allocates nothing.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace pi {

class device_worker {
  public:
    using job = std::function<void(size_t layer, int32_t n_tokens)>;
    explicit device_worker(job body);
    ~device_worker();
    device_worker(const device_worker&) = delete;
    device_worker& operator=(const device_worker&) = delete;

    void start(size_t layer, int32_t n_tokens);
    // Waits for the started job; rethrows what it threw.
    void wait();
    // When the last job that wait() returned from ended.
    std::chrono::steady_clock::time_point finished() const noexcept { return finished_; }

  private:
    void loop();

    job body_;
    std::mutex mutex_;
    std::condition_variable changed_;
    bool has_job_ = false, stopping_ = false;
    size_t layer_ = 0;
    int32_t n_tokens_ = 0;
    std::exception_ptr error_;
    std::chrono::steady_clock::time_point finished_{};
    std::thread thread_;
};

} // namespace pi
