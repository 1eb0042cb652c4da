// mul_mat, mul_mat_sparse, axpy_sparse and select_active against naive loops (double sums).
// Tolerance: |got - want| <= 1e-5 * sum|w*x| + 1e-6, where want uses the very values the
// tensors hold (F16 weights are rounded through half first), so only summation order and the
// final rounding to float differ; plus 2^-11 * sum|w*x| for F16 products where AUTO picks
// neon_fp16, which rounds the activations to binary16.
#include "backend_test_util.hpp"

#include <algorithm>
#include <numeric>

using namespace pi::test;

namespace {

constexpr double rel_tol = 1e-5;
constexpr double abs_tol = 1e-6;

struct shape {
    int64_t cols, rows, n_tok;
};

// y[t][r] = sum_c w[r][c] * x[t][c], with scale[t][r] = sum_c |w[r][c] * x[t][c]|.
void naive_mul_mat(const std::vector<float>& w, const std::vector<float>& x, const shape& s,
                   std::vector<double>& y, std::vector<double>& scale) {
    y.assign(static_cast<size_t>(s.rows * s.n_tok), 0.0);
    scale.assign(y.size(), 0.0);
    for (int64_t t = 0; t < s.n_tok; ++t)
        for (int64_t r = 0; r < s.rows; ++r)
            for (int64_t c = 0; c < s.cols; ++c) {
                const double term = static_cast<double>(w[r * s.cols + c]) * x[t * s.cols + c];
                y[t * s.rows + r] += term;
                scale[t * s.rows + r] += std::fabs(term);
            }
}

std::vector<float> weights(uint32_t type, size_t n, uint32_t seed) {
    auto w = random_floats(n, seed);
    return type == F16 ? through_half(w) : w;
}

// Per-token active lists: token 0 empty, token 1 every row in descending order, the rest a
// random subset in random order.
std::vector<std::vector<int32_t>> make_lists(int64_t rows, int64_t n_tok, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::vector<int32_t>> lists(static_cast<size_t>(n_tok));
    for (int64_t t = 1; t < n_tok; ++t) {
        for (int32_t r = 0; r < rows; ++r)
            if (t == 1 || rng() % 3 == 0) lists[t].push_back(r);
        if (t == 1)
            std::reverse(lists[t].begin(), lists[t].end());
        else
            std::shuffle(lists[t].begin(), lists[t].end(), rng);
    }
    return lists;
}

} // namespace

TEST_CASE("mul_mat matches a naive product for F32 and F16 weights, identical on 1 and 2 "
          "threads") {
    const shape shapes[] = {{37, 29, 1}, {37, 29, 3}, {1, 5, 2}, {5, 1, 1}, {257, 300, 5}};
    for (uint32_t type : {F32, F16}) {
        for (const shape& s : shapes) {
            CAPTURE(type);
            CAPTURE(s.cols);
            CAPTURE(s.rows);
            CAPTURE(s.n_tok);
            const auto w = weights(type, static_cast<size_t>(s.cols * s.rows), 1);
            const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tok), 2);
            std::vector<double> want, scale;
            naive_mul_mat(w, x, s, want, scale);
            std::vector<float> got[2];
            for (int threads : {1, 2}) {
                cpu_device d(threads);
                const pib_tensor tw = d.typed(type, s.cols, s.rows, w, 6);
                const pib_tensor tx = d.f32(s.cols, s.n_tok, x, 4);
                const pib_tensor ty = d.zeros_f32(s.rows, s.n_tok, 12);
                REQUIRE(d.vt().mul_mat(d.ctx(), &tw, &tx, &ty) == PIB_OK);
                got[threads - 1] = d.read_f32(ty);
                check_close(got[threads - 1], want, scale, auto_level_tolerance(type, rel_tol),
                            abs_tol);
            }
            CHECK(bitwise_equal(got[0], got[1]));
        }
    }
}

TEST_CASE("mul_mat_sparse computes listed rows and writes zeros everywhere else") {
    const shape shapes[] = {{23, 41, 4}, {1, 3, 2}, {257, 300, 3}};
    for (uint32_t type : {F32, F16}) {
        for (const shape& s : shapes) {
            CAPTURE(type);
            CAPTURE(s.rows);
            const auto w = weights(type, static_cast<size_t>(s.cols * s.rows), 3);
            const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tok), 4);
            const auto lists = make_lists(s.rows, s.n_tok, 5);
            std::vector<double> dense, dense_scale;
            naive_mul_mat(w, x, s, dense, dense_scale);
            std::vector<double> want(dense.size(), 0.0), scale(dense.size(), 0.0);
            for (int64_t t = 0; t < s.n_tok; ++t)
                for (int32_t r : lists[t]) {
                    want[t * s.rows + r] = dense[t * s.rows + r];
                    scale[t * s.rows + r] = dense_scale[t * s.rows + r];
                }
            std::vector<float> got[2];
            for (int threads : {1, 2}) {
                cpu_device d(threads);
                const pib_tensor tw = d.typed(type, s.cols, s.rows, w);
                const pib_tensor tx = d.f32(s.cols, s.n_tok, x);
                const auto l = upload_lists(d, lists, s.rows);
                // Garbage in y: every element not listed must come back as exactly 0.
                const pib_tensor ty = d.f32(s.rows, s.n_tok, random_floats(want.size(), 6), 8);
                REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &tw, &tx, &l.idx, &l.count, &ty) == PIB_OK);
                got[threads - 1] = d.read_f32(ty);
                check_close(got[threads - 1], want, scale, auto_level_tolerance(type, rel_tol),
                            0.0);
            }
            CHECK(bitwise_equal(got[0], got[1]));
        }
    }
}

TEST_CASE("mul_mat_sparse with every row listed equals mul_mat, and index capacity may be "
          "smaller than the row count") {
    cpu_device d;
    const shape s{19, 33, 2};
    const auto w = random_floats(static_cast<size_t>(s.cols * s.rows), 7);
    const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tok), 8);
    const pib_tensor tw = d.f32(s.cols, s.rows, w);
    const pib_tensor tx = d.f32(s.cols, s.n_tok, x);
    const pib_tensor dense = d.zeros_f32(s.rows, s.n_tok);
    REQUIRE(d.vt().mul_mat(d.ctx(), &tw, &tx, &dense) == PIB_OK);

    std::vector<std::vector<int32_t>> all(2);
    for (int32_t r = 0; r < s.rows; ++r)
        all[0].push_back(r), all[1].push_back(r);
    const auto l = upload_lists(d, all, s.rows);
    const pib_tensor sparse = d.zeros_f32(s.rows, s.n_tok);
    REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &tw, &tx, &l.idx, &l.count, &sparse) == PIB_OK);
    CHECK(bitwise_equal(d.read_f32(dense), d.read_f32(sparse)));

    const std::vector<std::vector<int32_t>> few = {{4, 30}, {}};
    const auto small = upload_lists(d, few, 2);
    REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &tw, &tx, &small.idx, &small.count, &sparse) == PIB_OK);
    const auto got = d.read_f32(sparse);
    const auto ref = d.read_f32(dense);
    for (int64_t i = 0; i < s.rows * s.n_tok; ++i)
        CHECK(got[i] == (i == 4 || i == 30 ? ref[i] : 0.0f));
}

TEST_CASE("mul_mat_sparse2 gives each matrix the bits of its own mul_mat_sparse, and rejects what "
          "either would, mismatched pairs and overlapping outputs") {
    const shape s{96, 41, 3};
    const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tok), 21);
    const auto lists = make_lists(s.rows, s.n_tok, 22);
    const std::pair<uint32_t, uint32_t> pairs[] = {{F32, F32}, {F16, F16}, {F32, F16}};
    for (const auto& [type0, type1] : pairs) {
        for (int64_t n_tok : {int64_t{1}, s.n_tok}) {
            CAPTURE(type0);
            CAPTURE(type1);
            CAPTURE(n_tok);
            cpu_device d(2);
            const auto n = static_cast<size_t>(s.cols * s.rows);
            const pib_tensor w0 = d.typed(type0, s.cols, s.rows, weights(type0, n, 23));
            const pib_tensor w1 = d.typed(type1, s.cols, s.rows, weights(type1, n, 24));
            const pib_tensor tx =
                d.f32(s.cols, n_tok, std::span<const float>(x.data(), s.cols * n_tok));
            const auto l = upload_lists(
                d, std::vector<std::vector<int32_t>>(lists.begin(), lists.begin() + n_tok), s.rows);
            const pib_tensor y0 = d.zeros_f32(s.rows, n_tok), y1 = d.zeros_f32(s.rows, n_tok);
            const pib_tensor p0 = d.f32(s.rows, n_tok, random_floats(s.rows * n_tok, 25));
            const pib_tensor p1 = d.f32(s.rows, n_tok, random_floats(s.rows * n_tok, 26));
            const auto& vt = d.vt();
            REQUIRE(vt.mul_mat_sparse(d.ctx(), &w0, &tx, &l.idx, &l.count, &y0) == PIB_OK);
            REQUIRE(vt.mul_mat_sparse(d.ctx(), &w1, &tx, &l.idx, &l.count, &y1) == PIB_OK);
            REQUIRE(vt.mul_mat_sparse2(d.ctx(), &w0, &w1, &tx, &l.idx, &l.count, &p0, &p1) ==
                    PIB_OK);
            CHECK(bitwise_equal(d.read_f32(p0), d.read_f32(y0)));
            CHECK(bitwise_equal(d.read_f32(p1), d.read_f32(y1)));
        }
    }

    cpu_device d;
    const auto& vt = d.vt();
    const pib_tensor w = d.f32(8, 5, random_floats(40, 27));
    const pib_tensor x2 = d.f32(8, 2, random_floats(16, 28));
    const auto l = upload_lists(d, {{0, 4}, {2}}, 2);
    const pib_tensor y = d.zeros_f32(5, 2), y_other = d.zeros_f32(5, 2);
    CHECK(vt.mul_mat_sparse2(d.ctx(), &w, &w, &x2, &l.idx, &l.count, &y, &y_other) == PIB_OK);
    CHECK(vt.mul_mat_sparse2(d.ctx(), nullptr, &w, &x2, &l.idx, &l.count, &y, &y_other) ==
          PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.mul_mat_sparse2(d.ctx(), &w, &w, &x2, &l.idx, &l.count, &y, nullptr) ==
          PIB_ERR_INVALID_ARGUMENT);
    // One output for both, or one overlapping the other by a row.
    CHECK(vt.mul_mat_sparse2(d.ctx(), &w, &w, &x2, &l.idx, &l.count, &y, &y) ==
          PIB_ERR_INVALID_ARGUMENT);
    const pib_tensor wide = d.zeros_f32(5, 3);
    pib_tensor second_row = wide, first_rows = wide;
    second_row.offset += wide.nb1;
    second_row.ne1 = 2;
    first_rows.ne1 = 2;
    CHECK(vt.mul_mat_sparse2(d.ctx(), &w, &w, &x2, &l.idx, &l.count, &first_rows, &second_row) ==
          PIB_ERR_INVALID_ARGUMENT);
    // Matrices of different shapes, and a list index past the rows.
    const pib_tensor w6 = d.f32(8, 6, random_floats(48, 29));
    const pib_tensor y6 = d.zeros_f32(6, 2);
    CHECK(vt.mul_mat_sparse2(d.ctx(), &w, &w6, &x2, &l.idx, &l.count, &y, &y6) ==
          PIB_ERR_INVALID_ARGUMENT);
    const auto past = upload_lists(d, {{0, 5}, {2}}, 2);
    CHECK(vt.mul_mat_sparse2(d.ctx(), &w, &w, &x2, &past.idx, &past.count, &y, &y_other) ==
          PIB_ERR_INVALID_ARGUMENT);
    // A type neither kernel reads, in either place, fails before anything is written.
    const std::vector<unsigned char> blocks(292 * 5, 0);
    const pib_tensor q = d.raw(Q8_K, 256, 5, blocks.data());
    const pib_tensor w256 = d.f32(256, 5, random_floats(256 * 5, 30));
    const pib_tensor x256 = d.f32(256, 2, random_floats(512, 31));
    const pib_tensor marked = d.f32(5, 2, std::vector<float>(10, 7.0f));
    CHECK(vt.mul_mat_sparse2(d.ctx(), &w256, &q, &x256, &l.idx, &l.count, &marked, &y_other) ==
          PIB_ERR_UNSUPPORTED);
    CHECK(d.read_f32(marked) == std::vector<float>(10, 7.0f));
    CHECK(vt.mul_mat_sparse2(d.ctx(), &q, &w256, &x256, &l.idx, &l.count, &y, &y_other) ==
          PIB_ERR_UNSUPPORTED);
}

TEST_CASE("axpy_sparse accumulates the listed rows of the transposed matrix into y") {
    struct ashape {
        int64_t n_out, n_ff, n_tok;
    };
    // n_out 600 spans several 256-column blocks.
    const ashape shapes[] = {{45, 67, 4}, {1, 1, 2}, {600, 70, 3}};
    for (uint32_t type : {F32, F16}) {
        for (const ashape& s : shapes) {
            CAPTURE(type);
            CAPTURE(s.n_out);
            const auto wt = weights(type, static_cast<size_t>(s.n_out * s.n_ff), 9);
            auto a = random_floats(static_cast<size_t>(s.n_ff * s.n_tok), 10);
            for (size_t i = 0; i < a.size(); i += 3)
                a[i] = 0.0f; // skipped neurons
            const auto y0 = random_floats(static_cast<size_t>(s.n_out * s.n_tok), 11);
            const auto lists = make_lists(s.n_ff, s.n_tok, 12);
            std::vector<double> want(y0.begin(), y0.end());
            std::vector<double> scale(want.size());
            for (size_t i = 0; i < want.size(); ++i)
                scale[i] = std::fabs(want[i]);
            for (int64_t t = 0; t < s.n_tok; ++t)
                for (int32_t i : lists[t])
                    for (int64_t o = 0; o < s.n_out; ++o) {
                        const double term =
                            static_cast<double>(a[t * s.n_ff + i]) * wt[i * s.n_out + o];
                        want[t * s.n_out + o] += term;
                        scale[t * s.n_out + o] += std::fabs(term);
                    }
            std::vector<float> got[2];
            for (int threads : {1, 2}) {
                cpu_device d(threads);
                const pib_tensor tw = d.typed(type, s.n_out, s.n_ff, wt, 2);
                const pib_tensor ta = d.f32(s.n_ff, s.n_tok, a);
                const auto l = upload_lists(d, lists, s.n_ff);
                const pib_tensor ty = d.f32(s.n_out, s.n_tok, y0, 4);
                REQUIRE(d.vt().axpy_sparse(d.ctx(), &tw, &ta, &l.idx, &l.count, &ty) == PIB_OK);
                got[threads - 1] = d.read_f32(ty);
                check_close(got[threads - 1], want, scale, rel_tol, abs_tol);
                // Token 0 has an empty list: its row of y is left exactly as it was.
                for (int64_t o = 0; o < s.n_out; ++o)
                    CHECK(got[threads - 1][o] == y0[o]);
            }
            CHECK(bitwise_equal(got[0], got[1]));
        }
    }
}

TEST_CASE("select_active lists ascending indices at or above the threshold") {
    const int64_t n_ff = 53, n_tok = 4;
    auto p = random_floats(static_cast<size_t>(n_ff * n_tok), 13);
    std::fill(p.begin(), p.begin() + n_ff, -1.0f);           // token 0: none active
    std::fill(p.begin() + n_ff, p.begin() + 2 * n_ff, 0.3f); // token 1: all, == threshold
    for (int threads : {1, 2}) {
        cpu_device d(threads);
        const pib_tensor tp = d.f32(n_ff, n_tok, p, 4);
        const pib_tensor idx = d.i32(n_ff, n_tok, std::vector<int32_t>(n_ff * n_tok, -5));
        const pib_tensor count = d.i32(n_tok, 1, std::vector<int32_t>(n_tok, -5));
        REQUIRE(d.vt().select_active(d.ctx(), &tp, 0.3f, &idx, &count) == PIB_OK);
        const auto got_idx = d.read<int32_t>(idx);
        const auto got_count = d.read<int32_t>(count);
        for (int64_t t = 0; t < n_tok; ++t) {
            std::vector<int32_t> want;
            for (int32_t i = 0; i < n_ff; ++i)
                if (p[t * n_ff + i] >= 0.3f) want.push_back(i);
            REQUIRE(got_count[t] == static_cast<int32_t>(want.size()));
            CHECK(std::equal(want.begin(), want.end(), got_idx.begin() + t * n_ff));
        }
        CHECK(got_count[0] == 0);
        CHECK(got_count[1] == n_ff);
    }
}

TEST_CASE("select_active fails without writing when a list exceeds the index capacity") {
    cpu_device d;
    const pib_tensor tp = d.f32(6, 2, std::vector<float>{1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0});
    const pib_tensor idx = d.i32(3, 2, std::vector<int32_t>(6, -5));
    const pib_tensor count = d.i32(2, 1, std::vector<int32_t>{-5, -5});
    CHECK(d.vt().select_active(d.ctx(), &tp, 0.5f, &idx, &count) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.read<int32_t>(count) == std::vector<int32_t>{-5, -5});
    CHECK(d.read<int32_t>(idx) == std::vector<int32_t>(6, -5));
}

TEST_CASE("matrix kernels reject bad arguments with INVALID_ARGUMENT and other weight types "
          "with UNSUPPORTED") {
    cpu_device d;
    const pib_tensor w = d.f32(8, 5, random_floats(40, 1));
    const pib_tensor x = d.f32(8, 2, random_floats(16, 2));
    const pib_tensor y = d.zeros_f32(5, 2);
    const auto& vt = d.vt();
    REQUIRE(vt.mul_mat(d.ctx(), &w, &x, &y) == PIB_OK);

    SUBCASE("null pointers") {
        CHECK(vt.mul_mat(d.ctx(), nullptr, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.mul_mat(d.ctx(), &w, nullptr, &y) == PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.mul_mat(d.ctx(), &w, &x, nullptr) == PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.mul_mat(nullptr, &w, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
        pib_tensor no_buffer = w;
        no_buffer.buffer = nullptr;
        CHECK(vt.mul_mat(d.ctx(), &no_buffer, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
    }
    SUBCASE("shape mismatches") {
        const pib_tensor x7 = d.f32(7, 2, random_floats(14, 3));
        CHECK(vt.mul_mat(d.ctx(), &w, &x7, &y) == PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor y4 = d.zeros_f32(4, 2);
        CHECK(vt.mul_mat(d.ctx(), &w, &x, &y4) == PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor y3tok = d.zeros_f32(5, 3);
        CHECK(vt.mul_mat(d.ctx(), &w, &x, &y3tok) == PIB_ERR_INVALID_ARGUMENT);
        pib_tensor negative = w;
        negative.ne1 = -1;
        CHECK(vt.mul_mat(d.ctx(), &negative, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
    }
    SUBCASE("strides, offsets and alignment") {
        pib_tensor narrow = w;
        narrow.nb1 = 28; // a row of 8 floats needs 32 bytes
        CHECK(vt.mul_mat(d.ctx(), &narrow, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
        pib_tensor past_end = w;
        past_end.offset += 4; // the last row now ends 4 bytes past the buffer
        CHECK(vt.mul_mat(d.ctx(), &past_end, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
        pib_tensor huge = w;
        huge.offset = SIZE_MAX - 8;
        CHECK(vt.mul_mat(d.ctx(), &huge, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
        pib_tensor huge_rows = w;
        huge_rows.ne1 = INT64_MAX / 2;
        CHECK(vt.mul_mat(d.ctx(), &huge_rows, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
        pib_tensor misaligned = y;
        misaligned.offset -= 2;
        CHECK(vt.mul_mat(d.ctx(), &w, &x, &misaligned) == PIB_ERR_INVALID_ARGUMENT);
    }
    SUBCASE("types") {
        pib_tensor unknown = w;
        unknown.type = 4; // a removed ggml type id
        CHECK(vt.mul_mat(d.ctx(), &unknown, &x, &y) == PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor xh = d.f16(8, 2, random_floats(16, 4));
        CHECK(vt.mul_mat(d.ctx(), &w, &xh, &y) == PIB_ERR_INVALID_ARGUMENT);
        const std::vector<unsigned char> blocks(292 * 5, 0);
        const pib_tensor q = d.raw(Q8_K, 256, 5, blocks.data()); // Q8_K is no weight type
        const pib_tensor x32 = d.f32(256, 2, random_floats(512, 5));
        CHECK(vt.mul_mat(d.ctx(), &q, &x32, &y) == PIB_ERR_UNSUPPORTED);
        const auto l = upload_lists(d, {{0}, {1}}, 1);
        CHECK(vt.mul_mat_sparse(d.ctx(), &q, &x32, &l.idx, &l.count, &y) == PIB_ERR_UNSUPPORTED);
    }
    SUBCASE("index lists") {
        const auto ok = upload_lists(d, {{0, 4}, {2}}, 2);
        REQUIRE(vt.mul_mat_sparse(d.ctx(), &w, &x, &ok.idx, &ok.count, &y) == PIB_OK);
        const auto out_of_range = upload_lists(d, {{0, 5}, {2}}, 2);
        CHECK(vt.mul_mat_sparse(d.ctx(), &w, &x, &out_of_range.idx, &out_of_range.count, &y) ==
              PIB_ERR_INVALID_ARGUMENT);
        const auto negative = upload_lists(d, {{0}, {-1}}, 2);
        CHECK(vt.mul_mat_sparse(d.ctx(), &w, &x, &negative.idx, &negative.count, &y) ==
              PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor too_many = d.i32(2, 1, std::vector<int32_t>{3, 1});
        CHECK(vt.mul_mat_sparse(d.ctx(), &w, &x, &ok.idx, &too_many, &y) ==
              PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor negative_count = d.i32(2, 1, std::vector<int32_t>{-1, 1});
        CHECK(vt.mul_mat_sparse(d.ctx(), &w, &x, &ok.idx, &negative_count, &y) ==
              PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor short_count = d.i32(1, 1, std::vector<int32_t>{1});
        CHECK(vt.mul_mat_sparse(d.ctx(), &w, &x, &ok.idx, &short_count, &y) ==
              PIB_ERR_INVALID_ARGUMENT);
        const pib_tensor float_idx = d.f32(2, 2, std::vector<float>(4, 0.0f));
        CHECK(vt.mul_mat_sparse(d.ctx(), &w, &x, &float_idx, &ok.count, &y) ==
              PIB_ERR_INVALID_ARGUMENT);

        // axpy_sparse over wt [5][8]: list entries index its 8 rows.
        const pib_tensor wt = d.f32(5, 8, random_floats(40, 6));
        const pib_tensor a = d.f32(8, 2, random_floats(16, 7));
        const auto rows_ok = upload_lists(d, {{7}, {0, 3}}, 2);
        REQUIRE(vt.axpy_sparse(d.ctx(), &wt, &a, &rows_ok.idx, &rows_ok.count, &y) == PIB_OK);
        const auto rows_bad = upload_lists(d, {{8}, {0}}, 2);
        CHECK(vt.axpy_sparse(d.ctx(), &wt, &a, &rows_bad.idx, &rows_bad.count, &y) ==
              PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.axpy_sparse(d.ctx(), &wt, &a, &rows_ok.idx, &too_many, &y) ==
              PIB_ERR_INVALID_ARGUMENT);
        CHECK(vt.axpy_sparse(d.ctx(), &wt, &y, &rows_ok.idx, &rows_ok.count, &y) ==
              PIB_ERR_INVALID_ARGUMENT); // a must have wt's 8 rows as its length
        CHECK(vt.select_active(d.ctx(), &x, 0.0f, &ok.idx, &short_count) ==
              PIB_ERR_INVALID_ARGUMENT);
    }
}
