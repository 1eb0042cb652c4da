// Buffers, device facts and how a backend reports bad arguments.
#include "conformance.hpp"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

using namespace pi::conformance;

namespace {

const pib_backend& tested() {
    return current().be[under_test];
}

// The status of a kernel call, or of the next synchronize when the call itself succeeded:
// errors found on the device surface there.
template <class F> int outcome(F&& f) {
    const pib_backend& b = tested();
    const int st = f(*b.vt, b.ctx);
    return st != PIB_OK ? st : b.vt->synchronize(b.ctx);
}

} // namespace

TEST_CASE("device_info names the device and its kind") {
    pib_device_info info{};
    REQUIRE(tested().vt->device_info(tested().ctx, &info) == PIB_OK);
    REQUIRE(info.name != nullptr);
    REQUIRE(info.kind != nullptr);
    CHECK(std::string(info.kind) == current().name);
    CHECK(info.memory_total > 0);
    CHECK(info.memory_free <= info.memory_total);
    CHECK(tested().vt->api_version == PIB_API_VERSION);
}

TEST_CASE("buffers round-trip bytes at any offset, clear to zero and refuse ranges past the end") {
    const pib_backend& b = tested();
    pib_buffer* buf = nullptr;
    REQUIRE(b.vt->buffer_alloc(b.ctx, 1001, &buf) == PIB_OK);
    CHECK(b.vt->buffer_size(b.ctx, buf) == 1001);
    std::vector<unsigned char> data(1001);
    std::iota(data.begin(), data.end(), static_cast<unsigned char>(3));
    CHECK(b.vt->buffer_upload(b.ctx, buf, 0, data.data(), data.size()) == PIB_OK);
    CHECK(b.vt->buffer_clear(b.ctx, buf, 17, 100) == PIB_OK);
    std::vector<unsigned char> back(990);
    CHECK(b.vt->buffer_download(b.ctx, buf, 11, back.data(), back.size()) == PIB_OK);
    std::memset(data.data() + 17, 0, 100);
    CHECK(std::memcmp(back.data(), data.data() + 11, back.size()) == 0);
    CHECK(b.vt->buffer_upload(b.ctx, buf, 1000, data.data(), 2) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(b.vt->buffer_download(b.ctx, buf, 1002, back.data(), 0) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(b.vt->buffer_clear(b.ctx, buf, 0, 1002) == PIB_ERR_INVALID_ARGUMENT);
    b.vt->buffer_free(b.ctx, buf);
    b.vt->buffer_free(b.ctx, nullptr);
}

TEST_CASE("shape mismatches are refused with PIB_ERR_INVALID_ARGUMENT") {
    bench bn;
    const twin w = bn.f32(8, 4, random_floats(32, 50));
    const twin x = bn.f32(7, 1, random_floats(7, 51));
    const twin y = bn.f32(4, 1, random_floats(4, 52));
    bn.run([&](const pib_vtable& vt, void* ctx,
               int s) { return vt.mul_mat(ctx, &w.at[s], &x.at[s], &y.at[s]); },
           PIB_ERR_INVALID_ARGUMENT);
    bn.run([&](const pib_vtable& vt, void* ctx,
               int s) { return vt.add(ctx, &w.at[s], &x.at[s], &y.at[s]); },
           PIB_ERR_INVALID_ARGUMENT);
    pib_tensor past_end = w.at[under_test];
    past_end.ne1 = 1000;
    CHECK(tested().vt->relu(tested().ctx, &past_end, &past_end) == PIB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("quantized weights with partial blocks or misaligned rows are refused") {
    for (uint32_t type : {Q4_0, Q8_0}) {
        INFO(type_name(type));
        bench bn;
        const twin w = bn.typed(type, 64, 3, random_floats(64 * 3, 59));
        const twin x = bn.f32(48, 1, random_floats(48, 60));
        const twin y = bn.f32(3, 1, random_floats(3, 61));
        twin partial = w; // 48 elements: one and a half blocks
        for (pib_tensor& t : partial.at)
            t.ne0 = 48;
        bn.run([&](const pib_vtable& vt, void* ctx,
                   int s) { return vt.mul_mat(ctx, &partial.at[s], &x.at[s], &y.at[s]); },
               PIB_ERR_INVALID_ARGUMENT);
        const twin odd = bn.typed(type, 64, 3, random_floats(64 * 3, 62), 0, 33);
        const twin x64 = bn.f32(64, 1, random_floats(64, 63));
        bn.run([&](const pib_vtable& vt, void* ctx,
                   int s) { return vt.mul_mat(ctx, &odd.at[s], &x64.at[s], &y.at[s]); },
               PIB_ERR_INVALID_ARGUMENT);
        const twin ids = bn.i32(1, 1, std::vector<int32_t>{2});
        const twin row = bn.f32(48, 1, random_floats(48, 64));
        bn.run([&](const pib_vtable& vt, void* ctx,
                   int s) { return vt.get_rows(ctx, &partial.at[s], &ids.at[s], &row.at[s]); },
               PIB_ERR_INVALID_ARGUMENT);
        // Quantized tables are read-only: nothing stores into blocks.
        const twin src = bn.f32(64, 1, random_floats(64, 65));
        bn.run([&](const pib_vtable& vt, void* ctx,
                   int s) { return vt.set_rows(ctx, &src.at[s], &ids.at[s], &w.at[s]); },
               PIB_ERR_UNSUPPORTED);
    }
}

TEST_CASE("an index or count outside its range is reported, and the backend keeps working") {
    bench bn;
    const twin table = bn.f32(16, 4, random_floats(64, 53));
    const twin ids = bn.i32(2, 1, std::vector<int32_t>{1, 4});
    const twin out = bn.f32(16, 2, random_floats(32, 54));
    CHECK(outcome([&](const pib_vtable& vt, void* ctx) {
              return vt.get_rows(ctx, &table.at[under_test], &ids.at[under_test],
                                 &out.at[under_test]);
          }) == PIB_ERR_INVALID_ARGUMENT);
    const twin lists = bn.i32(4, 1, std::vector<int32_t>{0, 9, 0, 0});
    const twin count = bn.i32(1, 1, std::vector<int32_t>{2});
    const twin x = bn.f32(16, 1, random_floats(16, 55));
    const twin y = bn.f32(4, 1, random_floats(4, 56));
    CHECK(outcome([&](const pib_vtable& vt, void* ctx) {
              return vt.mul_mat_sparse(ctx, &table.at[under_test], &x.at[under_test],
                                       &lists.at[under_test], &count.at[under_test],
                                       &y.at[under_test]);
          }) == PIB_ERR_INVALID_ARGUMENT);
    if (tested().vt->mul_mat_sparse2 != nullptr) {
        const twin y1 = bn.f32(4, 1, random_floats(4, 59));
        CHECK(outcome([&](const pib_vtable& vt, void* ctx) {
                  return vt.mul_mat_sparse2(ctx, &table.at[under_test], &table.at[under_test],
                                            &x.at[under_test], &lists.at[under_test],
                                            &count.at[under_test], &y.at[under_test],
                                            &y1.at[under_test]);
              }) == PIB_ERR_INVALID_ARGUMENT);
    }
    const twin long_count = bn.i32(1, 1, std::vector<int32_t>{5}); // capacity 4
    const twin a = bn.f32(4, 1, random_floats(4, 57));
    const twin acc = bn.f32(16, 1, random_floats(16, 58));
    CHECK(outcome([&](const pib_vtable& vt, void* ctx) {
              return vt.axpy_sparse(ctx, &table.at[under_test], &a.at[under_test],
                                    &lists.at[under_test], &long_count.at[under_test],
                                    &acc.at[under_test]);
          }) == PIB_ERR_INVALID_ARGUMENT);
    const twin good = bn.i32(2, 1, std::vector<int32_t>{3, 0});
    bn.run([&](const pib_vtable& vt, void* ctx, int s) {
        return vt.get_rows(ctx, &table.at[s], &good.at[s], &out.at[s]);
    });
    CHECK(tested().vt->synchronize(tested().ctx) == PIB_OK);
    bn.expect_close(out, exact, "get_rows after a reported fault");
}

// Version 5: all the transfer entries or none; with them, copies beside the kernels that the
// two ordering calls put before or after kernels, and page-locked host memory.
TEST_CASE("transfers beside the kernels keep the order the ordering calls give them") {
    const pib_backend& b = tested();
    const pib_vtable& vt = *b.vt;
    const int transfer_entries =
        (vt.transfer_upload != nullptr) + (vt.transfer_download != nullptr) +
        (vt.transfer_after_kernels != nullptr) + (vt.kernels_after_transfers != nullptr) +
        (vt.transfer_wait != nullptr);
    CHECK((transfer_entries == 0 || transfer_entries == 5));
    CHECK((vt.host_alloc == nullptr) == (vt.host_free == nullptr));
    if (vt.host_alloc != nullptr) {
        void* p = nullptr;
        REQUIRE(vt.host_alloc(b.ctx, 1000, &p) == PIB_OK);
        REQUIRE(p != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
        std::memset(p, 0x5a, 1000); // the host may write all of it
        vt.host_free(b.ctx, p);
        vt.host_free(b.ctx, nullptr);
    }
    if (transfer_entries != 5) {
        MESSAGE(current().name, " has no transfer stream (version 5 entries are optional)");
        return;
    }
    constexpr int64_t n = 300;
    const size_t bytes = sizeof(float) * n;
    pib_buffer* buf = nullptr;
    REQUIRE(vt.buffer_alloc(b.ctx, 2 * bytes + 64, &buf) == PIB_OK);
    const pib_tensor x{F32, n, 1, bytes, buf, 0}, y{F32, n, 1, bytes, buf, bytes + 64};
    void* host = nullptr;
    const bool pinned =
        vt.host_alloc != nullptr && vt.host_alloc(b.ctx, 2 * bytes, &host) == PIB_OK;
    std::vector<float> fallback(pinned ? 0 : 2 * n);
    float* in = pinned ? static_cast<float*>(host) : fallback.data();
    float* out = in + n;
    for (int64_t i = 0; i < n; ++i)
        in[i] = static_cast<float>(i) - 100.5f;
    // x goes up beside the kernels; the kernel waits for it, the download for the kernel.
    CHECK(vt.transfer_upload(b.ctx, buf, 0, in, bytes) == PIB_OK);
    CHECK(vt.kernels_after_transfers(b.ctx) == PIB_OK);
    CHECK(vt.add(b.ctx, &x, &x, &y) == PIB_OK);
    CHECK(vt.transfer_after_kernels(b.ctx) == PIB_OK);
    CHECK(vt.transfer_download(b.ctx, buf, bytes + 64, out, bytes) == PIB_OK);
    CHECK(vt.transfer_wait(b.ctx) == PIB_OK);
    bool doubled = true;
    for (int64_t i = 0; i < n; ++i)
        doubled = doubled && out[i] == 2 * in[i];
    CHECK(doubled);
    // Two transfers into the same bytes land in the order submitted.
    std::vector<unsigned char> first(64, 1), second(64, 2), back(64);
    CHECK(vt.transfer_upload(b.ctx, buf, 8, first.data(), 64) == PIB_OK);
    CHECK(vt.transfer_upload(b.ctx, buf, 8, second.data(), 64) == PIB_OK);
    CHECK(vt.transfer_download(b.ctx, buf, 8, back.data(), 64) == PIB_OK);
    CHECK(vt.transfer_wait(b.ctx) == PIB_OK);
    CHECK(back == second);
    // Ranges past the end are refused before anything moves.
    CHECK(vt.transfer_upload(b.ctx, buf, 2 * bytes + 1, in, 64) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.transfer_download(b.ctx, buf, 2 * bytes + 60, out, 8) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.transfer_wait(b.ctx) == PIB_OK);
    CHECK(vt.synchronize(b.ctx) == PIB_OK);
    if (pinned) vt.host_free(b.ctx, host);
    vt.buffer_free(b.ctx, buf);
}
