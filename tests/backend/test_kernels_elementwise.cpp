// get_rows, set_rows, add, relu and glu. Copies and F32 adds are compared exactly; a product
// rounded once to float gets 1e-7 relative, silu (two roundings) 1e-6 relative.
#include "backend_test_util.hpp"

using namespace pi::test;

TEST_CASE("get_rows gathers rows of F32 and F16 tables as F32") {
    const int64_t n = 13, rows = 9;
    const std::vector<int32_t> ids = {8, 0, 3, 3};
    for (uint32_t type : {F32, F16}) {
        CAPTURE(type);
        auto table = random_floats(n * rows, 1);
        if (type == F16) table = through_half(table);
        cpu_device d;
        const pib_tensor tt = d.typed(type, n, rows, table, 2);
        const pib_tensor ti = d.i32(4, 1, ids);
        const pib_tensor out = d.zeros_f32(n, 4, 4);
        REQUIRE(d.vt().get_rows(d.ctx(), &tt, &ti, &out) == PIB_OK);
        const auto got = d.read_f32(out);
        for (size_t t = 0; t < ids.size(); ++t)
            for (int64_t i = 0; i < n; ++i)
                CHECK(got[t * n + i] == table[ids[t] * n + i]);
    }
}

TEST_CASE("get_rows rejects ids out of range and unsupported table types") {
    cpu_device d;
    const pib_tensor table = d.f32(4, 3, random_floats(12, 1));
    const pib_tensor out = d.zeros_f32(4, 2);
    for (const std::vector<int32_t>& bad : {std::vector<int32_t>{0, 3}, {-1, 0}}) {
        const pib_tensor ids = d.i32(2, 1, bad);
        CHECK(d.vt().get_rows(d.ctx(), &table, &ids, &out) == PIB_ERR_INVALID_ARGUMENT);
    }
    const pib_tensor ids3 = d.i32(3, 1, std::vector<int32_t>{0, 1, 2});
    CHECK(d.vt().get_rows(d.ctx(), &table, &ids3, &out) == PIB_ERR_INVALID_ARGUMENT);
    const std::vector<unsigned char> blocks(3 * 84, 0);
    const pib_tensor q = d.raw(Q2_K, 256, 3, blocks.data()); // K-quants are not read
    const pib_tensor ids = d.i32(2, 1, std::vector<int32_t>{0, 2});
    const pib_tensor out32 = d.zeros_f32(256, 2);
    CHECK(d.vt().get_rows(d.ctx(), &q, &ids, &out32) == PIB_ERR_UNSUPPORTED);
}

TEST_CASE("set_rows stores F32 rows into F32 and F16 tensors, the last duplicate winning") {
    const int64_t n = 13, dst_rows = 8;
    const std::vector<int32_t> rows = {5, 0, 7, 5};
    const auto src = random_floats(n * 4, 2);
    for (uint32_t type : {F32, F16}) {
        CAPTURE(type);
        const auto before = random_floats(n * dst_rows, 3);
        cpu_device d;
        const pib_tensor ts = d.f32(n, 4, src);
        const pib_tensor tr = d.i32(4, 1, rows);
        const pib_tensor dst = d.typed(type, n, dst_rows, before, 6);
        REQUIRE(d.vt().set_rows(d.ctx(), &ts, &tr, &dst) == PIB_OK);
        const auto got = type == F16 ? d.read_f16(dst) : d.read_f32(dst);
        const auto old = type == F16 ? through_half(before) : before;
        for (int64_t r = 0; r < dst_rows; ++r) {
            int64_t from = -1;
            for (size_t t = 0; t < rows.size(); ++t)
                if (rows[t] == r) from = static_cast<int64_t>(t);
            for (int64_t i = 0; i < n; ++i) {
                const float v = from < 0 ? old[r * n + i] : src[from * n + i];
                CHECK(got[r * n + i] == (type == F16 ? pi::fp16_to_fp32(pi::fp32_to_fp16(v)) : v));
            }
        }
        const pib_tensor bad = d.i32(4, 1, std::vector<int32_t>{0, 1, 8, 2});
        CHECK(d.vt().set_rows(d.ctx(), &ts, &bad, &dst) == PIB_ERR_INVALID_ARGUMENT);
    }
}

TEST_CASE("add, relu and glu compute element-wise results, also in place") {
    const int64_t n = 19, rows = 3;
    const auto a = random_floats(n * rows, 4);
    const auto b = random_floats(n * rows, 5);
    auto relu = [](double v) { return v > 0 ? v : 0.0; };
    auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
    cpu_device d;
    const auto& vt = d.vt();
    const pib_tensor ta = d.f32(n, rows, a, 4);
    const pib_tensor tb = d.f32(n, rows, b);

    SUBCASE("add") {
        const pib_tensor out = d.zeros_f32(n, rows, 8);
        REQUIRE(vt.add(d.ctx(), &ta, &tb, &out) == PIB_OK);
        const auto got = d.read_f32(out);
        for (size_t i = 0; i < a.size(); ++i)
            CHECK(got[i] == a[i] + b[i]);
        REQUIRE(vt.add(d.ctx(), &ta, &tb, &ta) == PIB_OK);
        CHECK(bitwise_equal(d.read_f32(ta), got));
    }
    SUBCASE("relu") {
        REQUIRE(vt.relu(d.ctx(), &ta, &ta) == PIB_OK);
        const auto got = d.read_f32(ta);
        for (size_t i = 0; i < a.size(); ++i)
            CHECK(got[i] == static_cast<float>(relu(a[i])));
    }
    SUBCASE("glu kinds") {
        const pib_tensor out = d.zeros_f32(n, rows);
        std::vector<double> want(a.size());
        REQUIRE(vt.glu(d.ctx(), &ta, &tb, PIB_GLU_RELU, &out) == PIB_OK);
        for (size_t i = 0; i < a.size(); ++i)
            want[i] = relu(a[i]) * b[i];
        check_close(d.read_f32(out), want, {}, 1e-7, 0.0);
        REQUIRE(vt.glu(d.ctx(), &ta, &tb, PIB_GLU_RELU_RELU, &out) == PIB_OK);
        for (size_t i = 0; i < a.size(); ++i)
            want[i] = relu(a[i]) * relu(b[i]);
        check_close(d.read_f32(out), want, {}, 1e-7, 0.0);
        REQUIRE(vt.glu(d.ctx(), &ta, &tb, PIB_GLU_SILU, &out) == PIB_OK);
        for (size_t i = 0; i < a.size(); ++i)
            want[i] = silu(a[i]) * b[i];
        check_close(d.read_f32(out), want, {}, 1e-6, 0.0);
        REQUIRE(vt.glu(d.ctx(), &ta, &tb, PIB_GLU_SILU, &ta) == PIB_OK); // out aliases gate
        CHECK(bitwise_equal(d.read_f32(ta), d.read_f32(out)));
        CHECK(vt.glu(d.ctx(), &ta, &tb, 3, &out) == PIB_ERR_INVALID_ARGUMENT);
    }
    SUBCASE("shape and type mismatches") {
        const pib_tensor other = d.zeros_f32(n, rows - 1);
        CHECK(vt.add(d.ctx(), &ta, &other, &ta) == PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.relu(d.ctx(), &ta, &other) == PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.glu(d.ctx(), &ta, &other, PIB_GLU_RELU, &ta) == PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor half = d.f16(n, rows, a);
        CHECK(vt.add(d.ctx(), &ta, &half, &ta) == PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.relu(d.ctx(), nullptr, &ta) == PIB_ERR_INVALID_ARGUMENT);
    }
}

TEST_CASE("add_row adds a bias to every row, or only at each row's listed entries") {
    const int64_t n = 9, rows = 3;
    const auto x = random_floats(n * rows, 11);
    const auto b = random_floats(n, 12);
    cpu_device d(2);
    const pib_tensor tx = d.f32(n, rows, x);
    const pib_tensor tb = d.f32(n, 1, b);
    REQUIRE(d.vt().add_row(d.ctx(), &tx, &tb, nullptr, nullptr) == PIB_OK);
    std::vector<float> want = x;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < n; ++i)
            want[r * n + i] += b[i];
    CHECK(bitwise_equal(d.read_f32(tx), want));

    const std::vector<std::vector<int32_t>> lists = {{0, 4, 8}, {}, {2}};
    const list_tensors l = upload_lists(d, lists, 4);
    REQUIRE(d.vt().add_row(d.ctx(), &tx, &tb, &l.idx, &l.count) == PIB_OK);
    for (size_t r = 0; r < lists.size(); ++r)
        for (int32_t i : lists[r])
            want[r * n + static_cast<size_t>(i)] += b[static_cast<size_t>(i)];
    CHECK(bitwise_equal(d.read_f32(tx), want));
}

TEST_CASE("add_row rejects a bias of another length, half a list and listed ids out of range") {
    cpu_device d;
    const pib_tensor x = d.f32(5, 2, random_floats(10, 1));
    const pib_tensor b4 = d.f32(4, 1, random_floats(4, 2));
    const pib_tensor b = d.f32(5, 1, random_floats(5, 3));
    CHECK(d.vt().add_row(d.ctx(), &x, &b4, nullptr, nullptr) == PIB_ERR_INVALID_ARGUMENT);
    const list_tensors good = upload_lists(d, {{1}, {4}}, 2);
    CHECK(d.vt().add_row(d.ctx(), &x, &b, &good.idx, nullptr) == PIB_ERR_INVALID_ARGUMENT);
    const list_tensors outside = upload_lists(d, {{1}, {5}}, 2);
    const auto before = d.read_f32(x);
    CHECK(d.vt().add_row(d.ctx(), &x, &b, &outside.idx, &outside.count) ==
          PIB_ERR_INVALID_ARGUMENT);
    CHECK(bitwise_equal(d.read_f32(x), before)); // nothing written before the check fails
}
