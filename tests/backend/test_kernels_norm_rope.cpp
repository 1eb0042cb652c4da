// rms_norm and rope against naive double-precision loops. Tolerances: RMSNorm 1e-5 relative
// (+1e-7 absolute), RoPE 1e-5 absolute (inputs in [-1, 1], rotations keep the magnitude).
#include "backend_test_util.hpp"

using namespace pi::test;

TEST_CASE("rms_norm matches x / sqrt(mean(x^2) + eps) * w, also in place") {
    const int64_t n = 37, rows = 3;
    const float eps = 1e-5f;
    const auto x = random_floats(n * rows, 1);
    const auto w = random_floats(n, 2, 0.5f, 1.5f);
    std::vector<double> want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < n; ++i)
            ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int64_t i = 0; i < n; ++i)
            want[r * n + i] = x[r * n + i] * inv * w[i];
    }
    std::vector<float> got[2];
    for (int threads : {1, 2}) {
        cpu_device d(threads);
        const pib_tensor tx = d.f32(n, rows, x, 4);
        const pib_tensor tw = d.f32(n, 1, w);
        const pib_tensor ty = d.zeros_f32(n, rows);
        REQUIRE(d.vt().rms_norm(d.ctx(), &tx, &tw, eps, &ty) == PIB_OK);
        got[threads - 1] = d.read_f32(ty);
        check_close(got[threads - 1], want, {}, 1e-5, 1e-7);
        REQUIRE(d.vt().rms_norm(d.ctx(), &tx, &tw, eps, &tx) == PIB_OK);
        CHECK(bitwise_equal(d.read_f32(tx), got[threads - 1]));
    }
    CHECK(bitwise_equal(got[0], got[1]));
}

TEST_CASE("rms_norm rejects mismatched weights, outputs and epsilons") {
    cpu_device d;
    const pib_tensor x = d.f32(5, 2, random_floats(10, 1));
    const pib_tensor w = d.f32(5, 1, random_floats(5, 2));
    const pib_tensor y = d.zeros_f32(5, 2);
    REQUIRE(d.vt().rms_norm(d.ctx(), &x, &w, 1e-6f, &y) == PIB_OK);
    const pib_tensor w4 = d.f32(4, 1, random_floats(4, 3));
    CHECK(d.vt().rms_norm(d.ctx(), &x, &w4, 1e-6f, &y) == PIB_ERR_INVALID_ARGUMENT);
    const pib_tensor y3 = d.zeros_f32(5, 3);
    CHECK(d.vt().rms_norm(d.ctx(), &x, &w, 1e-6f, &y3) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.vt().rms_norm(d.ctx(), &x, &w, -1.0f, &y) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.vt().rms_norm(d.ctx(), &x, nullptr, 1e-6f, &y) == PIB_ERR_INVALID_ARGUMENT);
}

namespace {

std::vector<double> naive_rope(const std::vector<float>& x, const std::vector<int32_t>& pos,
                               const pib_rope_params& p) {
    const int64_t row = static_cast<int64_t>(p.n_head) * p.head_dim;
    std::vector<double> out(x.begin(), x.end());
    for (size_t t = 0; t < pos.size(); ++t)
        for (int32_t h = 0; h < p.n_head; ++h)
            for (int32_t j = 0; j < p.n_rot / 2; ++j) {
                const double theta = pos[t] * static_cast<double>(p.freq_scale) *
                                     std::pow(static_cast<double>(p.freq_base), -2.0 * j / p.n_rot);
                const int64_t base = static_cast<int64_t>(t) * row + h * p.head_dim;
                const int64_t a = base + (p.mode == PIB_ROPE_NEOX ? j : 2 * j);
                const int64_t b = base + (p.mode == PIB_ROPE_NEOX ? j + p.n_rot / 2 : 2 * j + 1);
                const double x0 = x[a], x1 = x[b];
                out[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
                out[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
            }
    return out;
}

} // namespace

TEST_CASE("rope rotates pairs in NORMAL and NEOX modes and leaves elements past n_rot alone") {
    const std::vector<int32_t> pos = {0, 1, 7, 1000};
    const pib_rope_params params[] = {
        {3, 10, 6, PIB_ROPE_NORMAL, 10000.0f, 1.0f}, {3, 10, 6, PIB_ROPE_NEOX, 10000.0f, 1.0f},
        {2, 8, 8, PIB_ROPE_NORMAL, 500.0f, 0.5f},    {2, 8, 8, PIB_ROPE_NEOX, 500.0f, 0.25f},
        {1, 6, 0, PIB_ROPE_NEOX, 10000.0f, 1.0f},
    };
    for (const pib_rope_params& p : params) {
        CAPTURE(p.mode);
        CAPTURE(p.n_rot);
        const int64_t row = static_cast<int64_t>(p.n_head) * p.head_dim;
        const auto x = random_floats(static_cast<size_t>(row) * pos.size(), 3);
        const auto want = naive_rope(x, pos, p);
        std::vector<float> got[2];
        for (int threads : {1, 2}) {
            cpu_device d(threads);
            const pib_tensor tx = d.f32(row, static_cast<int64_t>(pos.size()), x, 8);
            const pib_tensor tp = d.i32(static_cast<int64_t>(pos.size()), 1, pos);
            REQUIRE(d.vt().rope(d.ctx(), &tx, &tp, &p) == PIB_OK);
            got[threads - 1] = d.read_f32(tx);
            check_close(got[threads - 1], want, {}, 0.0, 1e-5);
        }
        CHECK(bitwise_equal(got[0], got[1]));
        for (int64_t i = 0; i < row; ++i)
            CHECK(got[0][i] == x[i]); // position 0: identity
        for (size_t t = 0; t < pos.size(); ++t)
            for (int32_t h = 0; h < p.n_head; ++h)
                for (int32_t e = p.n_rot; e < p.head_dim; ++e) {
                    const size_t i = t * row + h * p.head_dim + e;
                    CHECK(got[0][i] == x[i]);
                }
    }
}

TEST_CASE("rope rejects bad parameters and shapes") {
    cpu_device d;
    const pib_tensor x = d.f32(12, 2, random_floats(24, 1));
    const pib_tensor pos = d.i32(2, 1, std::vector<int32_t>{0, 5});
    const pib_rope_params good{3, 4, 4, PIB_ROPE_NORMAL, 10000.0f, 1.0f};
    REQUIRE(d.vt().rope(d.ctx(), &x, &pos, &good) == PIB_OK);
    for (pib_rope_params bad : {
             pib_rope_params{3, 4, 3, PIB_ROPE_NORMAL, 10000.0f, 1.0f}, // odd n_rot
             pib_rope_params{3, 4, 6, PIB_ROPE_NORMAL, 10000.0f, 1.0f}, // n_rot > head_dim
             pib_rope_params{3, 4, 4, 1, 10000.0f, 1.0f},               // unknown mode
             pib_rope_params{2, 4, 4, PIB_ROPE_NORMAL, 10000.0f, 1.0f}, // ne0 != 2 * 4
             pib_rope_params{3, 4, 4, PIB_ROPE_NORMAL, 0.0f, 1.0f},     // freq_base
             pib_rope_params{0, 4, 4, PIB_ROPE_NORMAL, 10000.0f, 1.0f},
         }) {
        CAPTURE(bad.n_rot);
        CAPTURE(bad.mode);
        CHECK(d.vt().rope(d.ctx(), &x, &pos, &bad) == PIB_ERR_INVALID_ARGUMENT);
    }
    const pib_tensor short_pos = d.i32(1, 1, std::vector<int32_t>{0});
    CHECK(d.vt().rope(d.ctx(), &x, &short_pos, &good) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.vt().rope(d.ctx(), &x, &pos, nullptr) == PIB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("layer_norm matches (x - mean) / sqrt(var + eps) * w + b, with and without a bias") {
    const int64_t n = 41, rows = 3;
    const float eps = 1e-5f;
    const auto x = random_floats(n * rows, 5, -3.0f, 5.0f); // a non-zero mean to take out
    const auto w = random_floats(n, 6, 0.5f, 1.5f);
    const auto b = random_floats(n, 7);
    for (bool with_bias : {true, false}) {
        std::vector<double> want(x.size());
        for (int64_t r = 0; r < rows; ++r) {
            double mean = 0.0, var = 0.0;
            for (int64_t i = 0; i < n; ++i)
                mean += x[r * n + i];
            mean /= n;
            for (int64_t i = 0; i < n; ++i)
                var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
            const double inv = 1.0 / std::sqrt(var / n + eps);
            for (int64_t i = 0; i < n; ++i)
                want[r * n + i] = (x[r * n + i] - mean) * inv * w[i] + (with_bias ? b[i] : 0.0);
        }
        for (int threads : {1, 2}) {
            cpu_device d(threads);
            const pib_tensor tx = d.f32(n, rows, x, 4);
            const pib_tensor tw = d.f32(n, 1, w), tb = d.f32(n, 1, b);
            const pib_tensor ty = d.zeros_f32(n, rows);
            const pib_tensor* bias = with_bias ? &tb : nullptr;
            REQUIRE(d.vt().layer_norm(d.ctx(), &tx, &tw, bias, eps, &ty) == PIB_OK);
            const auto got = d.read_f32(ty);
            check_close(got, want, {}, 1e-5, 1e-6);
            REQUIRE(d.vt().layer_norm(d.ctx(), &tx, &tw, bias, eps, &tx) == PIB_OK);
            CHECK(bitwise_equal(d.read_f32(tx), got));
        }
    }
}

TEST_CASE("layer_norm rejects mismatched weights, biases, outputs and epsilons") {
    cpu_device d;
    const pib_tensor x = d.f32(5, 2, random_floats(10, 1));
    const pib_tensor w = d.f32(5, 1, random_floats(5, 2));
    const pib_tensor b = d.f32(5, 1, random_floats(5, 3));
    const pib_tensor y = d.zeros_f32(5, 2);
    REQUIRE(d.vt().layer_norm(d.ctx(), &x, &w, &b, 1e-6f, &y) == PIB_OK);
    const pib_tensor b4 = d.f32(4, 1, random_floats(4, 3));
    CHECK(d.vt().layer_norm(d.ctx(), &x, &w, &b4, 1e-6f, &y) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.vt().layer_norm(d.ctx(), &x, &b4, &b, 1e-6f, &y) == PIB_ERR_INVALID_ARGUMENT);
    const pib_tensor y3 = d.zeros_f32(5, 3);
    CHECK(d.vt().layer_norm(d.ctx(), &x, &w, &b, 1e-6f, &y3) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.vt().layer_norm(d.ctx(), &x, &w, &b, -1.0f, &y) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(d.vt().layer_norm(d.ctx(), &x, nullptr, &b, 1e-6f, &y) == PIB_ERR_INVALID_ARGUMENT);
}
