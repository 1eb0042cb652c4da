#pragma once
// The server's own counters (requests per route and status code, requests in flight, cancelled
// generations) and the Prometheus text of GET /metrics, which adds the scheduler's.
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "scheduler.hpp"

namespace pi_server {

class metrics {
  public:
    // Thread-safe; route is the path of a known route (or "other").
    void count_request(std::string_view route, int status);
    // A completion request from its submission until its response ends.
    void generation_started() noexcept { in_flight_.fetch_add(1, std::memory_order_relaxed); }
    void generation_ended() noexcept { in_flight_.fetch_sub(1, std::memory_order_relaxed); }
    // A generation whose client went away before it ended.
    void count_cancelled() noexcept { cancelled_.fetch_add(1, std::memory_order_relaxed); }

    uint64_t requests(std::string_view route, int status) const;
    int64_t in_flight() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
    uint64_t cancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }

    // Prometheus text format 0.0.4, every metric with # HELP and # TYPE.
    std::string prometheus_text(const scheduler_stats& stats) const;

  private:
    mutable std::mutex mutex_;
    std::map<std::string, std::map<int, uint64_t>, std::less<>> requests_; // route → code → count
    std::atomic<int64_t> in_flight_{0};
    std::atomic<uint64_t> cancelled_{0};
};

// The content type of prometheus_text().
inline constexpr const char* prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

} // namespace pi_server
