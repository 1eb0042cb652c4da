// The worker thread of the offload device's half: it runs the started job while the caller
// works, and hands back the job's failure.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>

#include "engine/device_worker.hpp"

using namespace pi;

TEST_CASE("the worker runs each started job once with its layer and token count") {
    std::atomic<size_t> layers{0};
    std::atomic<int32_t> tokens{0};
    std::atomic<int> runs{0};
    device_worker worker([&](size_t layer, int32_t n) {
        layers += layer;
        tokens += n;
        ++runs;
    });
    for (size_t il = 0; il < 5; ++il) {
        worker.start(il, 3);
        worker.wait();
    }
    CHECK(runs == 5);
    CHECK(layers == 0 + 1 + 2 + 3 + 4);
    CHECK(tokens == 15);
}

TEST_CASE("a job's exception reaches the caller's wait, and the worker goes on") {
    device_worker worker([](size_t layer, int32_t) {
        if (layer == 1) throw std::runtime_error("device failed");
    });
    worker.start(1, 1);
    CHECK_THROWS_WITH_AS(worker.wait(), "device failed", std::runtime_error);
    worker.start(2, 1);
    CHECK_NOTHROW(worker.wait());
}

TEST_CASE("waiting with no job started returns at once") {
    device_worker worker([](size_t, int32_t) {});
    CHECK_NOTHROW(worker.wait());
}

TEST_CASE("the worker records when its job ended") {
    device_worker worker([](size_t, int32_t) {});
    const auto before = std::chrono::steady_clock::now();
    worker.start(0, 1);
    worker.wait();
    CHECK(worker.finished() >= before);
    CHECK(worker.finished() <= std::chrono::steady_clock::now());
}
