#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "engine/device_worker.hpp"
#include "platform/parallel.hpp"
#include "platform/thread_name.hpp"

using namespace pi::platform;

namespace {

// Only Linux's name is read back here; elsewhere the naming is exercised but not checked.
#if defined(__linux__)
constexpr bool can_read_names = true;
std::string this_thread_name() {
    char name[16] = {};
    return pthread_getname_np(pthread_self(), name, sizeof name) == 0 ? name : "";
}
#else
constexpr bool can_read_names = false;
std::string this_thread_name() {
    return "";
}
#endif

// The name a fresh thread reads back after name_this_thread(name), and what the call returned.
std::pair<bool, std::string> named_on_a_thread(const std::string& name) {
    std::pair<bool, std::string> out;
    std::thread([&] {
        out.first = name_this_thread(name);
        out.second = this_thread_name();
    }).join();
    return out;
}

} // namespace

TEST_CASE("a thread names itself" * doctest::skip(!can_read_names)) {
    const auto [named, name] = named_on_a_thread("pi-test");
    CHECK(named);
    CHECK(name == "pi-test");
}

TEST_CASE("a long name is cut to the 15 bytes Linux keeps, never inside a character" *
          doctest::skip(!can_read_names)) {
    CHECK(named_on_a_thread("pi-pool-123456789").second == "pi-pool-1234567");
    // A two-byte "é" as bytes 14-15 fits; as bytes 15-16 it would be split, so it goes whole.
    const auto [named, name] = named_on_a_thread("pi-pool-12345\xC3\xA9");
    CHECK(named);
    CHECK(name == "pi-pool-12345\xC3\xA9");
    CHECK(named_on_a_thread("pi-pool-123456\xC3\xA9").second == "pi-pool-123456");
}

TEST_CASE("naming never fails loudly") {
    // Empty, and on a thread that is not the library's: true or false, but no crash or throw.
    std::thread([] {
        static_cast<void>(name_this_thread(""));
        static_cast<void>(name_this_thread(std::string(300, 'x')));
    }).join();
}

TEST_CASE("the device worker's thread is named pi-device" * doctest::skip(!can_read_names)) {
    std::string seen;
    pi::device_worker worker([&](size_t, int32_t) { seen = this_thread_name(); });
    worker.start(0, 1);
    worker.wait();
    CHECK(seen == "pi-device");
}

#if defined(POWERINFER_THREADING_POOL)
// oneTBB names none of its workers, so only the pool's are checked.
TEST_CASE("the pool's workers are named pi-pool-N" * doctest::skip(!can_read_names)) {
    const std::thread::id caller = std::this_thread::get_id();
    std::mutex mutex;
    std::vector<std::string> names;
    std::atomic<int> started{0};
    task_arena arena(2);
    arena.execute([&] {
        // Two pieces that each wait for the other to start: the caller holds one, so the
        // worker must take the other.
        parallel_for(0, 2, 1, [&](int64_t, int64_t) {
            started.fetch_add(1);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (started.load() < 2 && std::chrono::steady_clock::now() < deadline)
                std::this_thread::yield();
            if (std::this_thread::get_id() != caller) {
                std::lock_guard lock(mutex);
                names.push_back(this_thread_name());
            }
        });
    });
    CHECK(names == std::vector<std::string>{"pi-pool-1"});
}
#endif
