// Every fast kernel at every instruction-set level this machine runs, against the scalar
// reference kernels (the oracle) on odd sizes: rank 1, sizes that are not a multiple of the
// vector width, 1 to 64 tokens, empty and full active lists, F32 and F16 weights and caches,
// padded rows and offset tensors. Results must not depend on the thread count (bitwise), and a
// token must get the same bits decoded alone as inside a batch.
//
// Tolerance for sums: |fast - scalar| <= 1e-4 * sum|terms| + 1e-6, with sum|terms| computed from
// the values the tensors hold (F16 inputs convert exactly, so only float rounding differs). The
// F16 products of neon_fp16 round each activation to binary16 first (relative error at most
// 2^-11), which adds 2^-11 * sum|terms|.
// Attention outputs are convex combinations of V values in [-1, 1]: 1e-5 absolute.
#include "backend_test_util.hpp"

#include "../test_env.hpp"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <string>

using namespace pi::test;

namespace {

constexpr double rel_tol = 1e-4;
constexpr double abs_tol = 1e-6;

// The relative tolerance of products with weights of `type` at `level`.
double rel_for(int32_t level, uint32_t type, double rel) {
    return level == PIB_CPU_KERNELS_NEON_FP16 && type == F16 ? rel + half_rounding : rel;
}

// Builds its tensors on a device, runs one kernel (REQUIREd to succeed) and returns the tensor
// holding the result.
using op_fn = std::function<pib_tensor(cpu_device&)>;

std::vector<float> run(int32_t level, int threads, const op_fn& op) {
    cpu_device d(threads, 0, level);
    const pib_tensor out = op(d);
    return d.read_f32(out);
}

// Every fast level against the scalar kernels (|got - want| <= rel * scale + abs, scale
// defaulting to |want|, rel widened by rel_for for products with weights of `type`), with
// identical bits on 1 and 2 threads.
void check_levels(const op_fn& op, std::span<const double> scale, double rel, double abs,
                  uint32_t type = F32) {
    const std::vector<float> ref = run(PIB_CPU_KERNELS_SCALAR, 1, op);
    const std::vector<double> want(ref.begin(), ref.end());
    for (int32_t level : fast_levels()) {
        CAPTURE(level);
        const auto one = run(level, 1, op);
        const auto two = run(level, 2, op);
        check_close(one, want, scale, rel_for(level, type, rel), abs);
        CHECK(bitwise_equal(one, two));
    }
}

std::vector<float> values(uint32_t type, size_t n, uint32_t seed) {
    auto v = random_floats(n, seed);
    return type == F16 ? through_half(v) : v;
}

// Per-token active lists, one letter per token: 'r' a random third of the rows in random order,
// 's' the same ascending, 'e' empty, 'a' every row in descending order, 'A' every row ascending.
std::vector<std::vector<int32_t>> make_lists(int64_t rows, const std::string& kinds,
                                             uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::vector<int32_t>> lists;
    for (char kind : kinds) {
        std::vector<int32_t> l;
        for (int32_t r = 0; r < rows; ++r)
            if (kind == 'a' || kind == 'A' || ((kind == 'r' || kind == 's') && rng() % 3 == 0))
                l.push_back(r);
        if (kind == 'a') std::reverse(l.begin(), l.end());
        if (kind == 'r') std::shuffle(l.begin(), l.end(), rng);
        lists.push_back(l);
    }
    return lists;
}

// kinds repeated to n tokens.
std::string repeat_kinds(const std::string& kinds, size_t n) {
    std::string out;
    while (out.size() < n)
        out += kinds[out.size() % kinds.size()];
    return out;
}

// Columns not a multiple of 8 or 16, exact multiples, rank 1, one row, and enough rows that
// 2 threads get several chunks each (with row prefetch) in decode and in batches.
const mat_shape mat_shapes[] = {{37, 29, 1},   {37, 29, 3}, {1, 5, 7},     {5, 1, 1},
                                {64, 40, 1},   {16, 24, 3}, {257, 300, 1}, {257, 300, 7},
                                {100, 70, 64}, {33, 9, 64}};

} // namespace

TEST_CASE("pib_cpu_backend_create_with names its level and rejects unknown levels") {
    pib_backend b{};
    CHECK(pib_cpu_backend_create_with(1, 0, PIB_CPU_KERNELS_NEON_FP16 + 1, &b) ==
          PIB_ERR_INVALID_ARGUMENT);
    CHECK(pib_cpu_backend_create_with(1, 0, -1, &b) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(pib_cpu_backend_create_with(1, 0, PIB_CPU_KERNELS_SCALAR, nullptr) ==
          PIB_ERR_INVALID_ARGUMENT);
    const auto name_of = [](int32_t level) {
        cpu_device d(1, 0, level);
        pib_device_info info{};
        REQUIRE(d.vt().device_info(d.ctx(), &info) == PIB_OK);
        return std::string(info.name);
    };
    CHECK(name_of(PIB_CPU_KERNELS_SCALAR) == "cpu (scalar)");
    const auto levels = fast_levels();
    const auto expected_name = [](int32_t level) -> std::string {
        switch (level) {
        case PIB_CPU_KERNELS_AVX2:
            return "cpu (avx2)";
        case PIB_CPU_KERNELS_AVX512:
            return "cpu (avx512)";
        case PIB_CPU_KERNELS_NEON:
            return "cpu (neon)";
        case PIB_CPU_KERNELS_NEON_DOTPROD:
            return "cpu (neon_dotprod)";
        default:
            return "cpu (neon_fp16)";
        }
    };
    for (int32_t level : levels)
        CHECK(name_of(level) == expected_name(level));
    const std::string best = levels.empty() ? "cpu (scalar)" : name_of(levels.back());
    CHECK(name_of(PIB_CPU_KERNELS_AUTO) == best);

    // The environment override lowers AUTO's choice, never raises it above the CPU.
    REQUIRE(pi::test::set_env("POWERINFER_CPU_KERNELS", "scalar") == 0);
    CHECK(name_of(PIB_CPU_KERNELS_AUTO) == "cpu (scalar)");
    REQUIRE(pi::test::set_env("POWERINFER_CPU_KERNELS", "avx512") == 0);
    CHECK(name_of(PIB_CPU_KERNELS_AUTO) == best);
    REQUIRE(pi::test::set_env("POWERINFER_CPU_KERNELS", "bogus") == 0);
    CHECK(name_of(PIB_CPU_KERNELS_AUTO) == best);
    // Another architecture's level gives the best level; NEON lowers NEON_DOTPROD and NEON_FP16.
    const bool arm = !levels.empty() && levels.front() == PIB_CPU_KERNELS_NEON;
    REQUIRE(pi::test::set_env("POWERINFER_CPU_KERNELS", "neon") == 0);
    CHECK(name_of(PIB_CPU_KERNELS_AUTO) == (arm ? "cpu (neon)" : best));
    REQUIRE(pi::test::set_env("POWERINFER_CPU_KERNELS", "avx2") == 0);
    CHECK(name_of(PIB_CPU_KERNELS_AUTO) == (arm              ? best
                                            : levels.empty() ? "cpu (scalar)"
                                                             : "cpu (avx2)"));
    REQUIRE(pi::test::unset_env("POWERINFER_CPU_KERNELS") == 0);
    if (levels.empty())
        MESSAGE("no fast kernel level on this machine: only the scalar kernels run");
}

TEST_CASE("fast mul_mat matches the scalar kernels for F32 and F16 weights, 1 to 64 tokens") {
    for (uint32_t type : {F32, F16}) {
        for (const mat_shape& s : mat_shapes) {
            CAPTURE(type);
            CAPTURE(s.cols);
            CAPTURE(s.rows);
            CAPTURE(s.n_tok);
            const auto w = values(type, static_cast<size_t>(s.cols * s.rows), 1);
            const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tok), 2);
            const auto scale = product_scale(w, x, s.cols, s.rows, s.n_tok);
            check_levels(
                [&](cpu_device& d) {
                    const pib_tensor tw = d.typed(type, s.cols, s.rows, w, 3);
                    const pib_tensor tx = d.f32(s.cols, s.n_tok, x, 5);
                    const pib_tensor ty = d.zeros_f32(s.rows, s.n_tok, 2);
                    REQUIRE(d.vt().mul_mat(d.ctx(), &tw, &tx, &ty) == PIB_OK);
                    return ty;
                },
                scale, rel_tol, abs_tol, type);
        }
    }
}

TEST_CASE("fast mul_mat_sparse matches the scalar kernels and zeroes unlisted rows") {
    struct sparse_case {
        int64_t cols, rows;
        std::string kinds;
    };
    const sparse_case cases[] = {
        {23, 41, "r"},   {23, 41, "e"},      {23, 41, "a"},
        {1, 3, "ra"},    {257, 300, "r"},    {257, 300, "a"},
        {23, 41, "rea"}, {257, 300, "rsea"}, {65, 130, repeat_kinds("rrsea", 64)},
    };
    for (uint32_t type : {F32, F16}) {
        for (const sparse_case& s : cases) {
            const auto n_tok = static_cast<int64_t>(s.kinds.size());
            CAPTURE(type);
            CAPTURE(s.rows);
            CAPTURE(s.kinds);
            const auto w = values(type, static_cast<size_t>(s.cols * s.rows), 3);
            const auto x = random_floats(static_cast<size_t>(s.cols * n_tok), 4);
            const auto lists = make_lists(s.rows, s.kinds, 5);
            const auto dense_scale = product_scale(w, x, s.cols, s.rows, n_tok);
            std::vector<double> scale(dense_scale.size(), 0.0);
            for (int64_t t = 0; t < n_tok; ++t)
                for (int32_t r : lists[t])
                    scale[t * s.rows + r] = dense_scale[t * s.rows + r];
            const auto garbage = random_floats(scale.size(), 6);
            // abs 0: an unlisted element must be exactly the scalar kernels' 0.
            check_levels(
                [&](cpu_device& d) {
                    const pib_tensor tw = d.typed(type, s.cols, s.rows, w, 1);
                    const pib_tensor tx = d.f32(s.cols, n_tok, x);
                    const auto l = upload_lists(d, lists, s.rows);
                    const pib_tensor ty = d.f32(s.rows, n_tok, garbage, 8);
                    REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &tw, &tx, &l.idx, &l.count, &ty) ==
                            PIB_OK);
                    return ty;
                },
                scale, rel_tol, 0.0, type);
        }
    }
}

TEST_CASE("fast axpy_sparse matches the scalar kernels, skipping zero activations") {
    // Batches listing under a quarter of the rows per token ("sse", "rse") take the token-major
    // path, the others the neuron-major one.
    struct axpy_case {
        int64_t n_out, n_ff;
        std::string kinds;
    };
    const axpy_case cases[] = {
        {45, 67, "r"},
        {45, 67, "e"},
        {45, 67, "a"},
        {1, 1, "aa"},
        {600, 70, "s"},
        {600, 70, "rsea"},
        {1000, 33, "a"},
        {37, 200, "rae"},
        {130, 300, repeat_kinds("srea", 64)},
        {130, 300, repeat_kinds("sse", 64)},
        {600, 70, "rse"},
    };
    for (uint32_t type : {F32, F16}) {
        for (const axpy_case& s : cases) {
            const auto n_tok = static_cast<int64_t>(s.kinds.size());
            CAPTURE(type);
            CAPTURE(s.n_out);
            CAPTURE(s.kinds);
            const auto wt = values(type, static_cast<size_t>(s.n_out * s.n_ff), 9);
            auto a = random_floats(static_cast<size_t>(s.n_ff * n_tok), 10);
            for (size_t i = 0; i < a.size(); i += 3)
                a[i] = 0.0f;
            const auto y0 = random_floats(static_cast<size_t>(s.n_out * n_tok), 11);
            const auto lists = make_lists(s.n_ff, s.kinds, 12);
            std::vector<double> scale(y0.size());
            for (size_t i = 0; i < y0.size(); ++i)
                scale[i] = std::fabs(y0[i]);
            for (int64_t t = 0; t < n_tok; ++t)
                for (int32_t i : lists[t])
                    for (int64_t o = 0; o < s.n_out; ++o)
                        scale[t * s.n_out + o] +=
                            std::fabs(static_cast<double>(a[t * s.n_ff + i]) * wt[i * s.n_out + o]);
            check_levels(
                [&](cpu_device& d) {
                    const pib_tensor tw = d.typed(type, s.n_out, s.n_ff, wt, 2);
                    const pib_tensor ta = d.f32(s.n_ff, n_tok, a);
                    const auto l = upload_lists(d, lists, s.n_ff);
                    const pib_tensor ty = d.f32(s.n_out, n_tok, y0, 4);
                    REQUIRE(d.vt().axpy_sparse(d.ctx(), &tw, &ta, &l.idx, &l.count, &ty) == PIB_OK);
                    return ty;
                },
                scale, rel_tol, abs_tol);
        }
    }
}

TEST_CASE("fast select_active lists the same indices as the scalar kernels") {
    struct select_case {
        int64_t n, n_tok;
        float threshold;
    };
    for (const select_case& s :
         {select_case{53, 4, 0.3f}, select_case{16, 1, -0.5f}, select_case{17, 3, 0.0f},
          select_case{1, 2, 0.5f}, select_case{5632, 1, 0.8f}}) {
        CAPTURE(s.n);
        auto p = random_floats(static_cast<size_t>(s.n * s.n_tok), 13);
        std::fill(p.begin(), p.begin() + s.n, s.threshold); // token 0: all, == threshold
        if (s.n_tok > 1) std::fill(p.begin() + s.n, p.begin() + 2 * s.n, -2.0f); // none
        auto lists = [&](int32_t level, int threads) {
            cpu_device d(threads, 0, level);
            const pib_tensor tp = d.f32(s.n, s.n_tok, p, 3);
            const pib_tensor idx = d.i32(s.n, s.n_tok, std::vector<int32_t>(s.n * s.n_tok, -5));
            const pib_tensor count = d.i32(s.n_tok, 1, std::vector<int32_t>(s.n_tok, -5));
            REQUIRE(d.vt().select_active(d.ctx(), &tp, s.threshold, &idx, &count) == PIB_OK);
            auto out = d.read<int32_t>(idx);
            const auto n = d.read<int32_t>(count);
            out.insert(out.end(), n.begin(), n.end());
            return out;
        };
        const auto want = lists(PIB_CPU_KERNELS_SCALAR, 1);
        for (int32_t level : fast_levels()) {
            CAPTURE(level);
            CHECK(lists(level, 1) == want);
            CHECK(lists(level, 2) == want);
        }
    }
    for (int32_t level : fast_levels()) {
        cpu_device d(2, 0, level);
        const pib_tensor tp = d.f32(6, 2, std::vector<float>{1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0});
        const pib_tensor idx = d.i32(3, 2, std::vector<int32_t>(6, -5));
        const pib_tensor count = d.i32(2, 1, std::vector<int32_t>{-5, -5});
        CHECK(d.vt().select_active(d.ctx(), &tp, 0.5f, &idx, &count) == PIB_ERR_INVALID_ARGUMENT);
        CHECK(d.read<int32_t>(count) == std::vector<int32_t>{-5, -5});
    }
}

TEST_CASE("fast attention matches the scalar kernels for F16 and F32 caches") {
    struct attn_case {
        int32_t n_head, n_head_kv, head_dim, n_kv;
        int64_t cache_rows;
        std::vector<int32_t> q_pos;
    };
    // n_kv beyond 64 spans several softmax blocks; position 1 sees no cache row.
    const attn_case cases[] = {
        {4, 2, 6, 9, 12, {1, 4, 9}},
        {8, 2, 64, 70, 80, {75}},
        {8, 2, 64, 70, 80, {1, 10, 30, 50, 60, 71, 90}},
        {2, 1, 17, 130, 131, {40, 200, 2}},
        {1, 1, 1, 3, 3, {5}},
    };
    for (uint32_t k_type : {F32, F16}) {
        for (uint32_t v_type : {F32, F16}) {
            for (const attn_case& c : cases) {
                CAPTURE(k_type);
                CAPTURE(v_type);
                CAPTURE(c.head_dim);
                CAPTURE(c.n_kv);
                const auto n_tok = static_cast<int64_t>(c.q_pos.size());
                const int64_t q_row = static_cast<int64_t>(c.n_head) * c.head_dim;
                const int64_t kv_row = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
                const auto q = random_floats(static_cast<size_t>(q_row * n_tok), 20, -2.0f, 2.0f);
                const auto k = values(k_type, static_cast<size_t>(kv_row * c.cache_rows), 21);
                const auto v = values(v_type, static_cast<size_t>(kv_row * c.cache_rows), 22);
                std::vector<int32_t> kv_pos;
                for (int32_t j = 0; j < c.cache_rows; ++j)
                    kv_pos.push_back(j + 2);
                std::shuffle(kv_pos.begin(), kv_pos.end(), std::mt19937(23));
                for (size_t j = 3; j < kv_pos.size(); j += 5)
                    kv_pos[j] = -1;
                const pib_attention_params p{c.n_head, c.n_head_kv, c.head_dim, c.n_kv, 0.35f};
                check_levels(
                    [&](cpu_device& d) {
                        const pib_tensor tq = d.f32(q_row, n_tok, q, 3);
                        const pib_tensor tk = d.typed(k_type, kv_row, c.cache_rows, k, 1);
                        const pib_tensor tv = d.typed(v_type, kv_row, c.cache_rows, v, 2);
                        const pib_tensor qp = d.i32(n_tok, 1, c.q_pos);
                        const pib_tensor kp = d.i32(c.cache_rows, 1, kv_pos);
                        const pib_tensor out = d.zeros_f32(q_row, n_tok, 1);
                        REQUIRE(d.vt().attention(d.ctx(), &tq, &tk, &tv, &qp, &kp, &p, &out) ==
                                PIB_OK);
                        return out;
                    },
                    {}, 1e-5, 1e-5);
            }
        }
    }
}

TEST_CASE("fast rms_norm matches the scalar kernels, also in place") {
    struct norm_case {
        int64_t n, rows;
    };
    for (const norm_case& s : {norm_case{1, 1}, norm_case{7, 3}, norm_case{37, 2},
                               norm_case{2048, 1}, norm_case{100, 5}}) {
        for (bool in_place : {false, true}) {
            CAPTURE(s.n);
            CAPTURE(in_place);
            const auto x = random_floats(static_cast<size_t>(s.n * s.rows), 30, -3.0f, 3.0f);
            const auto w = random_floats(static_cast<size_t>(s.n), 31);
            check_levels(
                [&](cpu_device& d) {
                    const pib_tensor tx = d.f32(s.n, s.rows, x, 1);
                    const pib_tensor tw = d.f32(s.n, 1, w);
                    const pib_tensor ty = in_place ? tx : d.zeros_f32(s.n, s.rows);
                    REQUIRE(d.vt().rms_norm(d.ctx(), &tx, &tw, 1e-5f, &ty) == PIB_OK);
                    return ty;
                },
                {}, 1e-5, 1e-6);
        }
    }
}

TEST_CASE("fast element-wise kernels match the scalar kernels: add, relu and ReLU GLUs exactly") {
    struct ew_case {
        int64_t n, rows;
    };
    for (const ew_case& s : {ew_case{1, 1}, ew_case{13, 3}, ew_case{100, 2}, ew_case{5632, 1}}) {
        CAPTURE(s.n);
        auto g = random_floats(static_cast<size_t>(s.n * s.rows), 40, -4.0f, 4.0f);
        const auto u = random_floats(g.size(), 41, -4.0f, 4.0f);
        // -0, NaN and magnitudes that leave exp's range, where the clamps matter.
        const float special[] = {-0.0f, std::nanf(""), 100.0f, -100.0f, 88.5f, -90.0f};
        for (size_t i = 0; i < std::size(special) && i < g.size(); ++i)
            g[i] = special[i];
        const auto binary = [&](auto call) {
            return [&, call](cpu_device& d) {
                const pib_tensor tg = d.f32(s.n, s.rows, g, 2);
                const pib_tensor tu = d.f32(s.n, s.rows, u);
                const pib_tensor out = d.zeros_f32(s.n, s.rows, 1);
                REQUIRE(call(d, tg, tu, out) == PIB_OK);
                return out;
            };
        };
        auto exact = [&](const op_fn& op) {
            const auto want = run(PIB_CPU_KERNELS_SCALAR, 1, op);
            for (int32_t level : fast_levels()) {
                CAPTURE(level);
                CHECK(bitwise_equal(run(level, 1, op), want));
                CHECK(bitwise_equal(run(level, 2, op), want));
            }
        };
        exact(binary([](cpu_device& d, auto& a, auto& b, auto& o) {
            return d.vt().add(d.ctx(), &a, &b, &o);
        }));
        exact(binary(
            [](cpu_device& d, auto& a, auto&, auto& o) { return d.vt().relu(d.ctx(), &a, &o); }));
        for (int32_t kind : {PIB_GLU_RELU, PIB_GLU_RELU_RELU})
            exact(binary([kind](cpu_device& d, auto& a, auto& b, auto& o) {
                return d.vt().glu(d.ctx(), &a, &b, kind, &o);
            }));
        // SiLU goes through exp: NaN stays NaN, everything else within float rounding.
        const auto silu = binary([](cpu_device& d, auto& a, auto& b, auto& o) {
            return d.vt().glu(d.ctx(), &a, &b, PIB_GLU_SILU, &o);
        });
        const auto want = run(PIB_CPU_KERNELS_SCALAR, 1, silu);
        for (int32_t level : fast_levels()) {
            CAPTURE(level);
            auto got = run(level, 1, silu);
            CHECK(bitwise_equal(got, run(level, 2, silu)));
            std::vector<double> w(want.begin(), want.end());
            if (s.n * s.rows > 1) {
                CHECK(std::isnan(got[1]));
                got[1] = 0.0f;
                w[1] = 0.0;
            }
            check_close(got, w, {}, 1e-5, 1e-6);
        }
    }
}

TEST_CASE("F16 products keep activations past binary16's range, and sparse gives dense's bits") {
    // Tokens whose activations are far above binary16's largest value (65504), far below its
    // smallest normal one, mixed within a row, or zero: a level that rounds them to binary16
    // must scale them into range first, per token.
    const int64_t cols = 83, rows = 21;
    const float magnitudes[] = {1e6f, 3e4f, 1e-30f, 1.0f, 0.0f};
    const auto n_tok = static_cast<int64_t>(std::size(magnitudes));
    const auto w = values(F16, static_cast<size_t>(cols * rows), 60);
    auto x = random_floats(static_cast<size_t>(cols * n_tok), 61);
    for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t c = 0; c < cols; ++c)
            x[t * cols + c] *= magnitudes[t] * (c % 5 == 0 ? 7e-6f : 1.0f);
    const auto scale = product_scale(w, x, cols, rows, n_tok);
    const auto lists = make_lists(rows, repeat_kinds("A", static_cast<size_t>(n_tok)), 62);
    for (const bool sparse : {false, true}) {
        CAPTURE(sparse);
        check_levels(
            [&](cpu_device& d) {
                const pib_tensor tw = d.typed(F16, cols, rows, w);
                const pib_tensor tx = d.f32(cols, n_tok, x);
                const pib_tensor ty = d.zeros_f32(rows, n_tok);
                if (!sparse) {
                    REQUIRE(d.vt().mul_mat(d.ctx(), &tw, &tx, &ty) == PIB_OK);
                    return ty;
                }
                const auto l = upload_lists(d, lists, rows);
                REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &tw, &tx, &l.idx, &l.count, &ty) == PIB_OK);
                return ty;
            },
            scale, rel_tol, 0.0, F16);
    }
    for (int32_t level : fast_levels()) {
        CAPTURE(level);
        cpu_device d(2, 0, level);
        const pib_tensor tw = d.typed(F16, cols, rows, w);
        const pib_tensor tx = d.f32(cols, n_tok, x);
        const pib_tensor dense = d.zeros_f32(rows, n_tok), sparse = d.zeros_f32(rows, n_tok);
        const auto l = upload_lists(d, lists, rows);
        REQUIRE(d.vt().mul_mat(d.ctx(), &tw, &tx, &dense) == PIB_OK);
        REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &tw, &tx, &l.idx, &l.count, &sparse) == PIB_OK);
        const auto got = d.read_f32(dense);
        CHECK(bitwise_equal(got, d.read_f32(sparse)));
        for (float v : got)
            CHECK(std::isfinite(v));
    }
}

TEST_CASE("a token gets the same bits from the fast kernels decoded alone or inside a batch") {
    const int64_t cols = 70, rows = 90, n_tok = 7;
    const auto x = random_floats(static_cast<size_t>(cols * n_tok), 50);
    const auto w = values(F16, static_cast<size_t>(cols * rows), 51);
    const auto a = random_floats(static_cast<size_t>(rows * n_tok), 52);
    // Ascending lists, as select_active makes them; the batch's axpy_sparse is neuron-major
    // with the first (over a quarter of the rows per token) and token-major with the second.
    for (const char* kinds : {"sAsesss", "sesesee"}) {
        CAPTURE(kinds);
        const auto lists = make_lists(rows, kinds, 53);
        size_t entries = 0;
        for (const auto& l : lists)
            entries += l.size();
        const bool token_major = std::string(kinds) == "sesesee";
        REQUIRE((entries * 4 < static_cast<size_t>(n_tok * rows)) == token_major);
        const std::vector<int32_t> positions = {0, 1, 2, 3, 4, 5, 6};
        const pib_attention_params ap{2, 2, cols / 2, static_cast<int32_t>(n_tok), 0.3f};
        for (int32_t level : fast_levels()) {
            CAPTURE(level);
            cpu_device d(2, 0, level);
            const auto& vt = d.vt();
            const pib_tensor tw = d.f16(cols, rows, w);
            const pib_tensor twt =
                d.f16(cols, rows, w); // as ffn_down_t: [n_out = cols][n_ff = rows]
            const pib_tensor kv = d.f16(cols, n_tok, x);
            const pib_tensor kv_pos = d.i32(n_tok, 1, positions);
            const auto batch = [&](int64_t t0, int64_t n) {
                const auto slice = [&](const std::vector<float>& v, int64_t len) {
                    return std::vector<float>(v.begin() + t0 * len, v.begin() + (t0 + n) * len);
                };
                const pib_tensor tx = d.f32(cols, n, slice(x, cols));
                const pib_tensor ta = d.f32(rows, n, slice(a, rows));
                const auto l = upload_lists(
                    d,
                    std::vector<std::vector<int32_t>>(lists.begin() + t0, lists.begin() + t0 + n),
                    rows);
                const pib_tensor dense = d.zeros_f32(rows, n), sparse = d.zeros_f32(rows, n);
                const pib_tensor down = d.f32(cols, n, slice(x, cols)), att = d.zeros_f32(cols, n);
                const pib_tensor qp = d.i32(
                    n, 1, std::vector<int32_t>(positions.begin() + t0, positions.begin() + t0 + n));
                REQUIRE(vt.mul_mat(d.ctx(), &tw, &tx, &dense) == PIB_OK);
                REQUIRE(vt.mul_mat_sparse(d.ctx(), &tw, &tx, &l.idx, &l.count, &sparse) == PIB_OK);
                REQUIRE(vt.axpy_sparse(d.ctx(), &twt, &ta, &l.idx, &l.count, &down) == PIB_OK);
                REQUIRE(vt.attention(d.ctx(), &tx, &kv, &kv, &qp, &kv_pos, &ap, &att) == PIB_OK);
                std::vector<std::vector<float>> out;
                for (const pib_tensor* t : {&dense, &sparse, &down, &att})
                    out.push_back(d.read_f32(*t));
                return out;
            };
            const auto all = batch(0, n_tok);
            for (int64_t t = 0; t < n_tok; ++t) {
                CAPTURE(t);
                const auto one = batch(t, 1);
                for (size_t k = 0; k < all.size(); ++k) {
                    CAPTURE(k);
                    const size_t len = one[k].size();
                    CHECK(bitwise_equal(one[k],
                                        std::span<const float>(all[k]).subspan(t * len, len)));
                }
            }
        }
    }
}
