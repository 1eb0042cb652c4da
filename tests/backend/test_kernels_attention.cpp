// attention against a naive causal softmax attention (double precision). Outputs are convex
// combinations of V values in [-1, 1]; tolerance 1e-5 absolute.
#include "backend_test_util.hpp"

#include <algorithm>
#include <limits>

using namespace pi::test;

namespace {

constexpr double tol = 1e-5;

struct attn_case {
    int32_t n_head, n_head_kv, head_dim, n_kv;
    int64_t cache_rows;
    float scale;
};

struct attn_data {
    std::vector<float> q, k, v;
    std::vector<int32_t> q_pos, kv_pos;
};

std::vector<double> naive_attention(const attn_case& c, const attn_data& d) {
    const int64_t n_tok = static_cast<int64_t>(d.q_pos.size());
    const int64_t q_row = static_cast<int64_t>(c.n_head) * c.head_dim;
    const int64_t kv_row = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
    std::vector<double> out(static_cast<size_t>(n_tok * q_row), 0.0);
    for (int64_t t = 0; t < n_tok; ++t) {
        for (int32_t h = 0; h < c.n_head; ++h) {
            const int32_t kvh = h / (c.n_head / c.n_head_kv);
            std::vector<double> score(static_cast<size_t>(c.n_kv));
            std::vector<bool> visible(static_cast<size_t>(c.n_kv));
            double max = -std::numeric_limits<double>::infinity();
            for (int32_t j = 0; j < c.n_kv; ++j) {
                visible[j] = d.kv_pos[j] >= 0 && d.kv_pos[j] <= d.q_pos[t];
                if (!visible[j]) continue;
                double s = 0.0;
                for (int32_t e = 0; e < c.head_dim; ++e)
                    s += static_cast<double>(d.q[t * q_row + h * c.head_dim + e]) *
                         d.k[j * kv_row + kvh * c.head_dim + e];
                score[j] = s * c.scale;
                max = std::max(max, score[j]);
            }
            double sum = 0.0;
            for (int32_t j = 0; j < c.n_kv; ++j)
                if (visible[j]) sum += std::exp(score[j] - max);
            if (sum == 0.0) continue; // nothing visible: zeros
            for (int32_t j = 0; j < c.n_kv; ++j) {
                if (!visible[j]) continue;
                const double p = std::exp(score[j] - max) / sum;
                for (int32_t e = 0; e < c.head_dim; ++e)
                    out[t * q_row + h * c.head_dim + e] +=
                        p * d.v[j * kv_row + kvh * c.head_dim + e];
            }
        }
    }
    return out;
}

// Cache positions are a shuffled 2..cache_rows+1 with a few empty (-1) cells, so visibility
// does not follow row order; token 0 sits at position 1 and sees nothing.
attn_data make_data(const attn_case& c, uint32_t kv_type, uint32_t seed) {
    const std::vector<int32_t> q_pos = {1, 4, 9, 30, 12};
    attn_data d;
    d.q_pos = q_pos;
    d.q = random_floats(q_pos.size() * c.n_head * c.head_dim, seed);
    d.k = random_floats(static_cast<size_t>(c.cache_rows) * c.n_head_kv * c.head_dim, seed + 1);
    d.v = random_floats(static_cast<size_t>(c.cache_rows) * c.n_head_kv * c.head_dim, seed + 2);
    if (kv_type == F16) {
        d.k = through_half(d.k);
        d.v = through_half(d.v);
    }
    std::mt19937 rng(seed + 3);
    for (int32_t j = 0; j < c.cache_rows; ++j)
        d.kv_pos.push_back(j + 2);
    std::shuffle(d.kv_pos.begin(), d.kv_pos.end(), rng);
    for (size_t j = 3; j < d.kv_pos.size(); j += 5)
        d.kv_pos[j] = -1;
    return d;
}

std::vector<float> run_attention(cpu_device& dev, const attn_case& c, const attn_data& d,
                                 uint32_t k_type, uint32_t v_type) {
    const int64_t n_tok = static_cast<int64_t>(d.q_pos.size());
    const int64_t q_row = static_cast<int64_t>(c.n_head) * c.head_dim;
    const int64_t kv_row = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
    const pib_tensor q = dev.f32(q_row, n_tok, d.q, 4);
    const pib_tensor k = dev.typed(k_type, kv_row, c.cache_rows, d.k, 6);
    const pib_tensor v = dev.typed(v_type, kv_row, c.cache_rows, d.v);
    const pib_tensor qp = dev.i32(n_tok, 1, d.q_pos);
    const pib_tensor kp = dev.i32(c.cache_rows, 1, d.kv_pos);
    const pib_tensor out = dev.f32(q_row, n_tok, random_floats(d.q.size(), 99), 8);
    const pib_attention_params p{c.n_head, c.n_head_kv, c.head_dim, c.n_kv, c.scale};
    REQUIRE(dev.vt().attention(dev.ctx(), &q, &k, &v, &qp, &kp, &p, &out) == PIB_OK);
    return dev.read_f32(out);
}

} // namespace

TEST_CASE("attention matches naive causal attention for MHA, GQA and MQA with F32 and F16 "
          "caches, identical on 1 and 2 threads") {
    const attn_case cases[] = {
        {4, 4, 12, 13, 16, 0.0f}, // MHA, rows past n_kv must be ignored
        {6, 2, 10, 21, 21, 0.0f}, // GQA
        {3, 1, 7, 9, 11, 0.0f},   // MQA, odd head_dim
        {2, 2, 5, 1, 1, 0.0f},    // a single cache row
        // Groups of 10 and 18 heads: more than one call takes, and more than one score tile;
        // more cache rows than one softmax block.
        {20, 2, 20, 37, 40, 0.0f},
        {18, 1, 64, 70, 70, 0.0f},
    };
    const std::pair<uint32_t, uint32_t> kv_types[] = {{F32, F32}, {F16, F16}, {F16, F32}};
    for (attn_case c : cases) {
        c.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        for (const auto& [kt, vt] : kv_types) {
            CAPTURE(c.n_head);
            CAPTURE(c.n_head_kv);
            CAPTURE(kt);
            CAPTURE(vt);
            const attn_data d = make_data(c, kt == F16 || vt == F16 ? F16 : F32, 20);
            const auto want = naive_attention(c, d);
            std::vector<float> got[2];
            for (int threads : {1, 2}) {
                cpu_device dev(threads);
                got[threads - 1] = run_attention(dev, c, d, kt, vt);
                check_close(got[threads - 1], want, {}, 0.0, tol);
            }
            CHECK(bitwise_equal(got[0], got[1]));
            // Token 0 (position 1) sees no cache row: its output is all zeros.
            for (int64_t i = 0; i < int64_t{c.n_head} * c.head_dim; ++i)
                CHECK(got[0][i] == 0.0f);
        }
    }
}

TEST_CASE("a query head gets the same bits whether its cache head is shared with other heads or "
          "its own") {
    // Grouped-query attention scores and sums a cache row for several heads at once; every head
    // must get the bits of multi-head attention over a cache where each head has its own copy.
    for (const attn_case c0 :
         {attn_case{20, 2, 20, 37, 40, 0.0f}, attn_case{8, 1, 64, 70, 70, 0.0f},
          attn_case{6, 3, 12, 21, 21, 0.0f}}) {
        attn_case c = c0;
        c.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        CAPTURE(c.n_head);
        CAPTURE(c.n_head_kv);
        const attn_data grouped = make_data(c, F16, 31);
        attn_case mha = c;
        mha.n_head_kv = c.n_head;
        attn_data own = grouped;
        own.k.clear();
        own.v.clear();
        const int32_t group = c.n_head / c.n_head_kv;
        for (int64_t j = 0; j < c.cache_rows; ++j)
            for (int32_t h = 0; h < c.n_head; ++h)
                for (int32_t e = 0; e < c.head_dim; ++e) {
                    const size_t at =
                        static_cast<size_t>((j * c.n_head_kv + h / group) * c.head_dim + e);
                    own.k.push_back(grouped.k[at]);
                    own.v.push_back(grouped.v[at]);
                }
        for (int32_t level : fast_levels()) {
            CAPTURE(level);
            cpu_device dev(2, 0, level);
            CHECK(bitwise_equal(run_attention(dev, c, grouped, F16, F16),
                                run_attention(dev, mha, own, F16, F16)));
        }
    }
}

TEST_CASE("attention subtracts the maximum score, so large scores stay finite") {
    attn_case c{2, 1, 16, 12, 12, 200.0f};
    attn_data d = make_data(c, F32, 30);
    const auto want = naive_attention(c, d);
    cpu_device dev;
    const auto got = run_attention(dev, c, d, F32, F32);
    for (float v : got)
        CHECK(std::isfinite(v));
    check_close(got, want, {}, 0.0, tol);
}

TEST_CASE("attention scratch grows with n_kv across calls on one backend") {
    cpu_device dev(2);
    for (int32_t n_kv : {3, 40, 7, 90}) {
        attn_case c{4, 2, 8, n_kv, n_kv, 0.35f};
        const attn_data d = make_data(c, F32, 40 + n_kv);
        check_close(run_attention(dev, c, d, F32, F32), naive_attention(c, d), {}, 0.0, tol);
    }
}

TEST_CASE("attention rejects bad parameters and shapes, and unsupported cache types") {
    cpu_device dev;
    const attn_case c{4, 2, 8, 6, 6, 0.35f};
    const attn_data d = make_data(c, F32, 50);
    const pib_tensor q = dev.f32(32, 5, d.q);
    const pib_tensor k = dev.f32(16, 6, d.k);
    const pib_tensor v = dev.f32(16, 6, d.v);
    const pib_tensor qp = dev.i32(5, 1, d.q_pos);
    const pib_tensor kp = dev.i32(6, 1, d.kv_pos);
    const pib_tensor out = dev.zeros_f32(32, 5);
    const auto& vt = dev.vt();
    const pib_attention_params good{4, 2, 8, 6, 0.35f};
    REQUIRE(vt.attention(dev.ctx(), &q, &k, &v, &qp, &kp, &good, &out) == PIB_OK);

    CHECK(vt.attention(dev.ctx(), &q, &k, &v, &qp, &kp, nullptr, &out) == PIB_ERR_INVALID_ARGUMENT);
    CHECK(vt.attention(dev.ctx(), &q, nullptr, &v, &qp, &kp, &good, &out) ==
          PIB_ERR_INVALID_ARGUMENT);
    for (pib_attention_params bad : {
             pib_attention_params{4, 3, 8, 6, 0.35f}, // n_head not a multiple of n_head_kv
             pib_attention_params{4, 0, 8, 6, 0.35f}, pib_attention_params{4, 2, 0, 6, 0.35f},
             pib_attention_params{4, 2, 8, 7, 0.35f}, // n_kv beyond the cache and kv_pos
             pib_attention_params{4, 2, 8, -1, 0.35f},
             pib_attention_params{4, 4, 8, 6, 0.35f}, // cache rows are too short
             pib_attention_params{2, 2, 8, 6, 0.35f}, // fine for the cache, not for q
         }) {
        CAPTURE(bad.n_head_kv);
        CAPTURE(bad.n_kv);
        CHECK(vt.attention(dev.ctx(), &q, &k, &v, &qp, &kp, &bad, &out) ==
              PIB_ERR_INVALID_ARGUMENT);
    }
    const pib_tensor short_qp = dev.i32(4, 1, std::vector<int32_t>(4, 0));
    CHECK(vt.attention(dev.ctx(), &q, &k, &v, &short_qp, &kp, &good, &out) ==
          PIB_ERR_INVALID_ARGUMENT);
    const pib_tensor short_kp = dev.i32(5, 1, std::vector<int32_t>(5, 0));
    CHECK(vt.attention(dev.ctx(), &q, &k, &v, &qp, &short_kp, &good, &out) ==
          PIB_ERR_INVALID_ARGUMENT);
    const pib_tensor out_short = dev.zeros_f32(32, 4);
    CHECK(vt.attention(dev.ctx(), &q, &k, &v, &qp, &kp, &good, &out_short) ==
          PIB_ERR_INVALID_ARGUMENT);
    const std::vector<unsigned char> blocks(6 * 18, 0);
    const pib_tensor kq = dev.raw(Q4_0, 32, 6, blocks.data());
    const pib_attention_params wide{4, 4, 8, 6, 0.35f};
    const pib_tensor vw = dev.f32(32, 6, random_floats(192, 1));
    CHECK(vt.attention(dev.ctx(), &q, &kq, &vw, &qp, &kp, &wide, &out) == PIB_ERR_UNSUPPORTED);
}
