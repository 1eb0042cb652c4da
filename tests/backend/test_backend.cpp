// The CPU backend's device facts, buffers, memory capacity and threads. Kernels are checked in
// test_kernels_*.cpp.
#include "backend_test_util.hpp"

#include <cstring>

using namespace pi::test;

TEST_CASE("pib_cpu_backend_create fills a vtable of the current API version") {
    CHECK(pib_cpu_backend_create(1, 0, nullptr) == PIB_ERR_INVALID_ARGUMENT);
    pib_backend b{};
    REQUIRE(pib_cpu_backend_create(0, 0, &b) == PIB_OK);
    REQUIRE(b.vt != nullptr);
    CHECK(b.vt->api_version == PIB_API_VERSION);
    CHECK(b.vt->synchronize(b.ctx) == PIB_OK);
    b.vt->destroy(b.ctx);
}

TEST_CASE("device_info reports a host-visible cpu device with the machine's RAM by default") {
    cpu_device d(1);
    pib_device_info info{};
    REQUIRE(d.vt().device_info(d.ctx(), &info) == PIB_OK);
    CHECK(std::strncmp(info.name, "cpu (", 5) == 0); // with the kernel level, e.g. "cpu (avx2)"
    CHECK(std::strcmp(info.kind, "cpu") == 0);
    CHECK(info.host_visible == 1);
    CHECK(info.memory_total > (size_t{64} << 20));
    CHECK(info.memory_free <= info.memory_total);
    CHECK(d.vt().device_info(d.ctx(), nullptr) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.vt().device_info(nullptr, &info) == PIB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("buffer_alloc charges the memory capacity and fails with OUT_OF_MEMORY beyond it") {
    const size_t cap = 1 << 20;
    cpu_device d(1, cap);
    const auto& vt = d.vt();
    pib_device_info info{};
    REQUIRE(vt.device_info(d.ctx(), &info) == PIB_OK);
    CHECK(info.memory_total == cap);
    CHECK(info.memory_free == cap);

    pib_buffer* a = nullptr;
    pib_buffer* b = nullptr;
    REQUIRE(vt.buffer_alloc(d.ctx(), 600 << 10, &a) == PIB_OK);
    REQUIRE(vt.device_info(d.ctx(), &info) == PIB_OK);
    CHECK(info.memory_free == cap - (600 << 10));
    CHECK(vt.buffer_alloc(d.ctx(), 600 << 10, &b) == PIB_ERR_OUT_OF_MEMORY);
    CHECK(b == nullptr);
    CHECK(vt.buffer_alloc(d.ctx(), SIZE_MAX, &b) == PIB_ERR_OUT_OF_MEMORY);
    vt.buffer_free(d.ctx(), a);
    REQUIRE(vt.buffer_alloc(d.ctx(), 600 << 10, &b) == PIB_OK);
    REQUIRE(vt.buffer_alloc(d.ctx(), cap - (600 << 10), &a) == PIB_OK); // exactly full
    REQUIRE(vt.device_info(d.ctx(), &info) == PIB_OK);
    CHECK(info.memory_free == 0);
    vt.buffer_free(d.ctx(), a);
    vt.buffer_free(d.ctx(), b);
    vt.buffer_free(d.ctx(), nullptr);
    REQUIRE(vt.device_info(d.ctx(), &info) == PIB_OK);
    CHECK(info.memory_free == cap);
    CHECK(vt.buffer_alloc(d.ctx(), 16, nullptr) == PIB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("buffers are 64-byte aligned and upload, download and clear within their bounds") {
    cpu_device d(1);
    const auto& vt = d.vt();
    pib_buffer* buf = nullptr;
    REQUIRE(vt.buffer_alloc(d.ctx(), 100, &buf) == PIB_OK);
    CHECK(vt.buffer_size(d.ctx(), buf) == 100);
    CHECK(reinterpret_cast<uintptr_t>(vt.buffer_host_ptr(d.ctx(), buf)) % 64 == 0);

    std::vector<unsigned char> src(40);
    for (size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<unsigned char>(i + 1);
    REQUIRE(vt.buffer_upload(d.ctx(), buf, 60, src.data(), src.size()) == PIB_OK);
    REQUIRE(vt.buffer_clear(d.ctx(), buf, 70, 5) == PIB_OK);
    std::vector<unsigned char> back(40);
    REQUIRE(vt.buffer_download(d.ctx(), buf, 60, back.data(), back.size()) == PIB_OK);
    for (size_t i = 0; i < back.size(); ++i)
        CHECK(back[i] == (i >= 10 && i < 15 ? 0 : src[i]));

    CHECK(vt.buffer_upload(d.ctx(), buf, 61, src.data(), 40) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_upload(d.ctx(), buf, SIZE_MAX, src.data(), 2) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_download(d.ctx(), buf, 0, back.data(), 101) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_download(d.ctx(), buf, 0, nullptr, 4) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_clear(d.ctx(), buf, 100, 1) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_clear(d.ctx(), nullptr, 0, 0) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_upload(d.ctx(), buf, 100, nullptr, 0) == PIB_OK);
    vt.buffer_free(d.ctx(), buf);
}

TEST_CASE("buffer_from_host wraps memory in place without charging the capacity") {
    cpu_device d(1, 64);
    const auto& vt = d.vt();
    std::vector<float> host(1024, 0.5f);
    host[0] = -1.0f;
    host[1] = 2.0f;
    const size_t bytes = host.size() * sizeof(float);
    pib_buffer* buf = nullptr;
    REQUIRE(vt.buffer_from_host(d.ctx(), host.data(), bytes, &buf) == PIB_OK);
    CHECK(vt.buffer_host_ptr(d.ctx(), buf) == host.data());
    CHECK(vt.buffer_size(d.ctx(), buf) == bytes);
    pib_device_info info{};
    REQUIRE(vt.device_info(d.ctx(), &info) == PIB_OK);
    CHECK(info.memory_free == 64);

    // Kernels read and write the wrapped memory itself.
    const pib_tensor t{F32, 2, 1, 8, buf, 0};
    REQUIRE(vt.relu(d.ctx(), &t, &t) == PIB_OK);
    CHECK(host[0] == 0.0f);
    CHECK(host[1] == 2.0f);
    vt.buffer_free(d.ctx(), buf);
    REQUIRE(vt.device_info(d.ctx(), &info) == PIB_OK);
    CHECK(info.memory_free == 64);

    CHECK(vt.buffer_from_host(d.ctx(), nullptr, 16, &buf) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_from_host(d.ctx(), host.data(), bytes, nullptr) == PIB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("set_n_threads accepts explicit counts and 0 for all hardware threads") {
    cpu_device d(1);
    const pib_tensor w = d.f32(64, 200, random_floats(64 * 200, 1));
    const pib_tensor x = d.f32(64, 3, random_floats(64 * 3, 2));
    const pib_tensor y = d.zeros_f32(200, 3);
    REQUIRE(d.vt().mul_mat(d.ctx(), &w, &x, &y) == PIB_OK);
    const auto one = d.read_f32(y);
    for (int32_t n : {2, 0, -1, 3}) {
        CAPTURE(n);
        REQUIRE(d.vt().set_n_threads(d.ctx(), n) == PIB_OK);
        REQUIRE(d.vt().buffer_clear(d.ctx(), y.buffer, 0, d.vt().buffer_size(d.ctx(), y.buffer)) ==
                PIB_OK);
        REQUIRE(d.vt().mul_mat(d.ctx(), &w, &x, &y) == PIB_OK);
        CHECK(bitwise_equal(d.read_f32(y), one));
    }
    CHECK(d.vt().set_n_threads(nullptr, 2) == PIB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("kernels given a null context return INVALID_ARGUMENT") {
    cpu_device d(1);
    const pib_tensor x = d.zeros_f32(4, 1);
    const auto& vt = d.vt();
    CHECK(vt.relu(nullptr, &x, &x) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.add(nullptr, &x, &x, &x) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.buffer_alloc(nullptr, 4, nullptr) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.synchronize(nullptr) == PIB_ERR_INVALID_ARGUMENT);
}
