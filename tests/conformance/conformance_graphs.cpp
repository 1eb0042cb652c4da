// Version 6: graph sessions. Kernels called between graph_begin and graph_end are recorded and
// submitted as graphs; the results and their order against copies must be those of launching
// each kernel when it is called.
#include "conformance.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

using namespace pi::conformance;

namespace {

const pib_backend& tested() {
    return current().be[under_test];
}

// Whether the backend under test has graph sessions: all three entries or none.
bool has_graphs() {
    const pib_vtable& vt = *tested().vt;
    const int entries =
        (vt.graph_begin != nullptr) + (vt.graph_end != nullptr) + (vt.graph_stats != nullptr);
    CHECK((entries == 0 || entries == 3));
    if (entries != 3)
        MESSAGE(current().name, " has no graph sessions (version 6 entries are optional)");
    return entries == 3;
}

pib_graph_stats counters() {
    pib_graph_stats g{};
    REQUIRE(tested().vt->graph_stats(tested().ctx, &g) == PIB_OK);
    return g;
}

// The deltas of two readings.
pib_graph_stats since(const pib_graph_stats& before) {
    const pib_graph_stats now = counters();
    return {now.kernels - before.kernels, now.launches - before.launches,
            now.graphs_replayed - before.graphs_replayed,
            now.graphs_updated - before.graphs_updated, now.graphs_created - before.graphs_created};
}

void begin() {
    REQUIRE(tested().vt->graph_begin(tested().ctx) == PIB_OK);
}

void end() {
    REQUIRE(tested().vt->graph_end(tested().ctx) == PIB_OK);
}

} // namespace

TEST_CASE("kernels of a graph session give the bits of kernels launched one by one, and an "
          "unchanged session is launched again as it was") {
    if (!has_graphs()) return;
    bench bn;
    const twin w = bn.f32(64, 48, random_floats(64 * 48, 80));
    const twin x = bn.f32(64, 1, random_floats(64, 81));
    const twin x2 = bn.f32(64, 1, random_floats(64, 82));
    const twin y = bn.f32(48, 1, random_floats(48, 83));
    const twin z = bn.f32(48, 1, random_floats(48, 84));
    // y = relu(w x); z = y + y, on one side; the oracle computes it once for the tolerance.
    const auto layer = [&](const twin& in, int s) {
        const pib_vtable& vt = *current().be[s].vt;
        void* ctx = current().be[s].ctx;
        REQUIRE(vt.mul_mat(ctx, &w.at[s], &in.at[s], &y.at[s]) == PIB_OK);
        REQUIRE(vt.relu(ctx, &y.at[s], &y.at[s]) == PIB_OK);
        REQUIRE(vt.add(ctx, &y.at[s], &y.at[s], &z.at[s]) == PIB_OK);
    };
    layer(x, oracle);
    layer(x, under_test);
    REQUIRE(tested().vt->synchronize(tested().ctx) == PIB_OK);
    const std::vector<unsigned char> one_by_one = bn.read(z, under_test);
    bn.expect_close(z, tol_reduction, "relu(w x) * 2 launched one by one");

    const pib_graph_stats start = counters();
    for (int session = 0; session < 2; ++session) {
        CAPTURE(session);
        bn.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.buffer_clear(ctx, z.at[s].buffer, z.at[s].offset, 48 * sizeof(float));
        });
        begin();
        layer(x, under_test);
        end();
        CHECK(bn.read(z, under_test) == one_by_one);
    }
    const pib_graph_stats two = since(start);
    CHECK(two.kernels == 6);
    CHECK(two.launches == 2);
    CHECK(two.graphs_created == 1);
    CHECK(two.graphs_replayed == 1);
    CHECK(two.graphs_updated == 0);

    // Other arguments, the same kernels: the graph is updated, and computes from x2.
    layer(x2, oracle);
    const pib_graph_stats before_update = counters();
    begin();
    layer(x2, under_test);
    end();
    bn.expect_close(z, tol_reduction, "the updated graph");
    const pib_graph_stats updated = since(before_update);
    CHECK(updated.graphs_updated == 1);
    CHECK(updated.graphs_created == 0);

    // Other kernels at that place: a new graph.
    const pib_graph_stats before_new = counters();
    begin();
    bn.run([&](const pib_vtable& vt, void* ctx, int s) {
        return vt.add(ctx, &x.at[s], &x2.at[s], &x.at[s]);
    });
    bn.run(
        [&](const pib_vtable& vt, void* ctx, int s) { return vt.relu(ctx, &x.at[s], &x.at[s]); });
    end();
    bn.expect_close(x, exact, "a new graph at the same place");
    CHECK(since(before_new).graphs_created == 1);

    // A run of one kernel is launched as itself.
    const pib_graph_stats before_single = counters();
    begin();
    bn.run([&](const pib_vtable& vt, void* ctx, int s) {
        return vt.add(ctx, &x.at[s], &x2.at[s], &x.at[s]);
    });
    end();
    bn.expect_close(x, exact, "a single kernel in a session");
    const pib_graph_stats single = since(before_single);
    CHECK(single.kernels == 1);
    CHECK(single.launches == 1);
    CHECK(single.graphs_created + single.graphs_updated + single.graphs_replayed == 0);
}

TEST_CASE("in a graph session, copies and synchronize come after the kernels called before "
          "them") {
    if (!has_graphs()) return;
    const pib_backend& b = tested();
    const pib_vtable& vt = *b.vt;
    constexpr int64_t n = 40;
    const size_t bytes = n * sizeof(float);
    pib_buffer* buf = nullptr;
    REQUIRE(vt.buffer_alloc(b.ctx, 2 * bytes, &buf) == PIB_OK);
    const pib_tensor x{F32, n, 1, bytes, buf, 0}, y{F32, n, 1, bytes, buf, bytes};
    std::vector<float> first(n), second(n), back(n);
    for (int64_t i = 0; i < n; ++i) {
        first[static_cast<size_t>(i)] = static_cast<float>(i) - 7.25f;
        second[static_cast<size_t>(i)] = 1000.0f + static_cast<float>(i);
    }
    REQUIRE(vt.buffer_upload(b.ctx, buf, 0, first.data(), bytes) == PIB_OK);
    begin();
    // Two kernels read x, then x changes: they must have read the first values.
    CHECK(vt.add(b.ctx, &x, &x, &y) == PIB_OK);
    CHECK(vt.relu(b.ctx, &y, &y) == PIB_OK);
    CHECK(vt.buffer_upload(b.ctx, buf, 0, second.data(), bytes) == PIB_OK);
    CHECK(vt.buffer_download(b.ctx, buf, bytes, back.data(), bytes) == PIB_OK);
    bool first_read = true;
    for (int64_t i = 0; i < n; ++i) {
        const float v = 2 * first[static_cast<size_t>(i)];
        first_read = first_read && back[static_cast<size_t>(i)] == (v > 0 ? v : 0.0f);
    }
    CHECK(first_read);
    // After the copy, kernels read the second values.
    CHECK(vt.add(b.ctx, &x, &x, &y) == PIB_OK);
    CHECK(vt.add(b.ctx, &y, &x, &y) == PIB_OK);
    CHECK(vt.synchronize(b.ctx) == PIB_OK);
    end();
    CHECK(vt.buffer_download(b.ctx, buf, bytes, back.data(), bytes) == PIB_OK);
    bool second_read = true;
    for (int64_t i = 0; i < n; ++i)
        second_read =
            second_read && back[static_cast<size_t>(i)] == 3 * second[static_cast<size_t>(i)];
    CHECK(second_read);
    vt.buffer_free(b.ctx, buf);
}

TEST_CASE("graph sessions refuse nesting, report bad arguments at the call and device faults at "
          "the next synchronize") {
    if (!has_graphs()) return;
    const pib_backend& b = tested();
    const pib_vtable& vt = *b.vt;
    bench bn;
    const twin table = bn.f32(16, 4, random_floats(64, 85));
    const twin bad_ids = bn.i32(2, 1, std::vector<int32_t>{1, 4});
    const twin good_ids = bn.i32(2, 1, std::vector<int32_t>{3, 0});
    const twin out = bn.f32(16, 2, random_floats(32, 86));
    const twin wrong = bn.f32(15, 2, random_floats(30, 87));
    CHECK(vt.graph_stats(b.ctx, nullptr) == PIB_ERR_INVALID_ARGUMENT);
    begin();
    CHECK(vt.graph_begin(b.ctx) == PIB_ERR_INVALID_ARGUMENT);
    // Checked on the host before anything is recorded.
    CHECK(vt.get_rows(b.ctx, &table.at[under_test], &good_ids.at[under_test],
                      &wrong.at[under_test]) == PIB_ERR_INVALID_ARGUMENT);
    // Found by the kernel on the device: the session ends, synchronize reports it.
    CHECK(vt.get_rows(b.ctx, &table.at[under_test], &bad_ids.at[under_test], &out.at[under_test]) ==
          PIB_OK);
    CHECK(vt.relu(b.ctx, &out.at[under_test], &out.at[under_test]) == PIB_OK);
    end();
    CHECK(vt.synchronize(b.ctx) == PIB_ERR_INVALID_ARGUMENT);
    // And the backend keeps working, in a session or not.
    begin();
    bn.run([&](const pib_vtable& v, void* ctx, int s) {
        return v.get_rows(ctx, &table.at[s], &good_ids.at[s], &out.at[s]);
    });
    bn.run(
        [&](const pib_vtable& v, void* ctx, int s) { return v.relu(ctx, &out.at[s], &out.at[s]); });
    end();
    CHECK(vt.synchronize(b.ctx) == PIB_OK);
    bn.expect_close(out, exact, "get_rows and relu after a reported fault");
}
