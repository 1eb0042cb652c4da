// Dense and sparse products and the active-neuron selection, on odd sizes, every weight type
// (F32, F16, Q4_0, Q8_0), padded rows, and (for GPUs) on both sides of every kernel's size and
// alignment switches.
//
// Tolerances (NMSE against the CPU's scalar reference, which sums dequantized weights in
// double): tol_reduction (1e-10) for every float product and accumulate; tol_product(type)
// for mul_mat and mul_mat_sparse, which is tol_q8_activations (1e-4) for Q4_0/Q8_0 weights on
// the CPU backend (its fast kernels quantize activations to Q8_0) and tol_reduction elsewhere.
#include "conformance.hpp"

#include <algorithm>
#include <random>
#include <span>

using namespace pi::conformance;

namespace {

// Ascending active lists, one per token, of density `p` over n rows (token 0 empty when there
// are at least two tokens, the last one full when there are at least three), padded to
// capacity n.
struct lists {
    std::vector<int32_t> idx;
    std::vector<int32_t> count;
};

lists make_lists(int64_t n, int64_t n_tok, double p, uint32_t seed) {
    std::mt19937 rng(seed);
    std::bernoulli_distribution on(p);
    lists l{std::vector<int32_t>(static_cast<std::size_t>(n * n_tok), -1),
            std::vector<int32_t>(static_cast<std::size_t>(n_tok), 0)};
    for (int64_t t = 0; t < n_tok; ++t) {
        int32_t k = 0;
        for (int64_t i = 0; i < n; ++i) {
            const bool keep =
                n_tok >= 3 && t == n_tok - 1 ? true : (t != 0 || n_tok == 1) && on(rng);
            if (keep) l.idx[t * n + k++] = static_cast<int32_t>(i);
        }
        l.count[t] = k;
    }
    return l;
}

struct product_case {
    int64_t k, rows, tokens;
    std::size_t pad;    // elements added to every weight row
    std::size_t offset; // of the weight tensor in its buffer
};

// Sizes below and above the GPU's vector and batch thresholds, rows that start on 16 bytes and
// rows that do not; a batch whose rows end in a partial tile of whole 16-byte units (k = 200).
const product_case float_cases[] = {
    {67, 33, 1, 0, 32},   {256, 129, 1, 0, 32},  {256, 129, 1, 0, 36}, {256, 70, 1, 3, 32},
    {67, 33, 5, 1, 32},   {256, 130, 16, 0, 32}, {131, 70, 37, 0, 32}, {96, 65, 67, 8, 32},
    {200, 70, 33, 0, 32}, {1000, 17, 2, 0, 32},  {0, 5, 3, 0, 32},     {0, 5, 20, 0, 32},
};

// Whole blocks per row: fewer quarter blocks than a group has lanes (k = 32, 96), a lane that
// takes a second unit (k = 288: 36 quarters), one whole step of the GPU's 32-block copies
// (k = 1024) and rows that end one or a few blocks into a further step (k = 1056, 2080, 3104);
// odd row counts; token counts on both sides of the batch switch; rows padded by whole blocks;
// weights at 2-byte but not 4-byte aligned offsets, and rows of an odd number of blocks, which
// alternate between the two.
const product_case quant_cases[] = {
    {32, 33, 1, 0, 32},    {96, 65, 1, 0, 34},    {288, 129, 1, 1, 32}, {256, 70, 3, 2, 34},
    {1024, 17, 5, 0, 32},  {1056, 19, 1, 0, 34},  {2080, 9, 4, 1, 32},  {3104, 7, 13, 0, 34},
    {288, 130, 16, 0, 32}, {1056, 21, 16, 0, 34}, {96, 70, 37, 1, 34},  {256, 65, 67, 0, 32},
    {0, 5, 3, 0, 32},      {0, 5, 20, 0, 32},
};

struct typed_cases {
    uint32_t type;
    std::span<const product_case> cases;
};

const typed_cases product_types[] = {
    {F32, float_cases}, {F16, float_cases}, {Q4_0, quant_cases}, {Q8_0, quant_cases}};

// The row-sparse product has no batch-size switch; longer batches only cost time.
constexpr int64_t sparse_max_tokens = 16;

std::string label(const char* op, uint32_t type, const product_case& c) {
    return std::string(op) + " " + type_name(type) + " k=" + std::to_string(c.k) +
           " rows=" + std::to_string(c.rows) + " tokens=" + std::to_string(c.tokens) +
           " pad=" + std::to_string(c.pad) + " offset=" + std::to_string(c.offset);
}

} // namespace

TEST_CASE("mul_mat matches the reference for F32, F16, Q4_0 and Q8_0 weights on odd sizes") {
    for (const auto& [type, cases] : product_types) {
        for (const product_case& c : cases) {
            bench b;
            const twin w =
                b.typed(type, c.k, c.rows, random_floats(c.k * c.rows, 1), c.pad, c.offset);
            const twin x = b.f32(c.k, c.tokens, random_floats(c.k * c.tokens, 2));
            const twin y = b.f32(c.rows, c.tokens, random_floats(c.rows * c.tokens, 3), 2);
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.mul_mat(ctx, &w.at[s], &x.at[s], &y.at[s]);
            });
            b.expect_close(y, tol_product(type, c.tokens), label("mul_mat", type, c));
        }
    }
}

TEST_CASE("mul_mat_sparse writes the listed rows and zeroes the others, for every weight type") {
    for (const auto& [type, cases] : product_types) {
        for (const product_case& c : cases) {
            if (c.tokens > sparse_max_tokens) continue;
            bench b;
            const twin w =
                b.typed(type, c.k, c.rows, random_floats(c.k * c.rows, 4), c.pad, c.offset);
            const twin x = b.f32(c.k, c.tokens, random_floats(c.k * c.tokens, 5));
            const lists l = make_lists(c.rows, c.tokens, 0.3, 6);
            const twin idx = b.i32(c.rows, c.tokens, l.idx);
            const twin count = b.i32(c.tokens, 1, l.count);
            const twin y = b.f32(c.rows, c.tokens, random_floats(c.rows * c.tokens, 7), 1);
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.mul_mat_sparse(ctx, &w.at[s], &x.at[s], &idx.at[s], &count.at[s],
                                         &y.at[s]);
            });
            b.expect_close(y, tol_product(type), label("mul_mat_sparse", type, c));
        }
    }
}

TEST_CASE("mul_mat_sparse2 gives each matrix what mul_mat_sparse gives it, for every weight type") {
    const pib_vtable& tested = *current().be[under_test].vt;
    if (tested.mul_mat_sparse2 == nullptr) return; // optional: the engine calls the single form
    for (const auto& [type, cases] : product_types) {
        for (const product_case& c : cases) {
            if (c.tokens > sparse_max_tokens) continue;
            bench b;
            const twin w0 =
                b.typed(type, c.k, c.rows, random_floats(c.k * c.rows, 40), c.pad, c.offset);
            // The second matrix at another offset: of F32 and F16 rows only one of the two may
            // start on 16 bytes, quantized rows start on 4 bytes in one and 2 in the other.
            const std::size_t shift = type == F32 || type == F16 ? 4 : 2;
            const twin w1 = b.typed(type, c.k, c.rows, random_floats(c.k * c.rows, 41), c.pad,
                                    c.offset + shift);
            const twin x = b.f32(c.k, c.tokens, random_floats(c.k * c.tokens, 42));
            const lists l = make_lists(c.rows, c.tokens, 0.3, 43);
            const twin idx = b.i32(c.rows, c.tokens, l.idx);
            const twin count = b.i32(c.tokens, 1, l.count);
            const twin y0 = b.f32(c.rows, c.tokens, random_floats(c.rows * c.tokens, 44), 1);
            const twin y1 = b.f32(c.rows, c.tokens, random_floats(c.rows * c.tokens, 45), 1);
            const twin alone0 = b.f32(c.rows, c.tokens, random_floats(c.rows * c.tokens, 46));
            const twin alone1 = b.f32(c.rows, c.tokens, random_floats(c.rows * c.tokens, 47));
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.mul_mat_sparse2(ctx, &w0.at[s], &w1.at[s], &x.at[s], &idx.at[s],
                                          &count.at[s], &y0.at[s], &y1.at[s]);
            });
            b.expect_close(y0, tol_product(type), label("mul_mat_sparse2 (first)", type, c));
            b.expect_close(y1, tol_product(type), label("mul_mat_sparse2 (second)", type, c));
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                const int st = vt.mul_mat_sparse(ctx, &w0.at[s], &x.at[s], &idx.at[s], &count.at[s],
                                                 &alone0.at[s]);
                if (st != PIB_OK) return st;
                return vt.mul_mat_sparse(ctx, &w1.at[s], &x.at[s], &idx.at[s], &count.at[s],
                                         &alone1.at[s]);
            });
            INFO(label("mul_mat_sparse2", type, c));
            CHECK(b.read(y0, under_test) == b.read(alone0, under_test));
            CHECK(b.read(y1, under_test) == b.read(alone1, under_test));
        }
    }
}

TEST_CASE("mul_mat_sparse2 refuses overlapping outputs and matrices of different shapes") {
    if (current().be[under_test].vt->mul_mat_sparse2 == nullptr) return;
    bench b;
    const twin w = b.typed(Q4_0, 64, 5, random_floats(320, 48));
    const twin w6 = b.typed(Q4_0, 64, 6, random_floats(384, 49));
    const twin x = b.f32(64, 2, random_floats(128, 50));
    const twin idx = b.i32(5, 2, std::vector<int32_t>{0, 4, -1, -1, -1, 2, -1, -1, -1, -1});
    const twin count = b.i32(2, 1, std::vector<int32_t>{2, 1});
    const twin y = b.f32(5, 2, random_floats(10, 51));
    const twin y6 = b.f32(6, 2, random_floats(12, 52));
    b.run(
        [&](const pib_vtable& vt, void* ctx, int s) {
            return vt.mul_mat_sparse2(ctx, &w.at[s], &w.at[s], &x.at[s], &idx.at[s], &count.at[s],
                                      &y.at[s], &y.at[s]);
        },
        PIB_ERR_INVALID_ARGUMENT);
    b.run(
        [&](const pib_vtable& vt, void* ctx, int s) {
            return vt.mul_mat_sparse2(ctx, &w.at[s], &w6.at[s], &x.at[s], &idx.at[s], &count.at[s],
                                      &y.at[s], &y6.at[s]);
        },
        PIB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("sparse products take empty, single-row, full and random lists, above 16 tokens too") {
    // Token t's list: empty, one row (the last, the first, or one between), every row, or
    // random, in turn; 20 tokens, past the dense product's batch switch.
    constexpr int64_t n_tok = 20;
    auto edge_lists = [](int64_t n) {
        std::mt19937 rng(53);
        std::bernoulli_distribution on(0.5);
        lists l{std::vector<int32_t>(static_cast<std::size_t>(n * n_tok), -1),
                std::vector<int32_t>(static_cast<std::size_t>(n_tok), 0)};
        for (int64_t t = 0; t < n_tok; ++t) {
            int32_t k = 0;
            for (int64_t i = 0; i < n; ++i) {
                const bool single = i == (t / 4 % 3 == 0 ? n - 1 : t / 4 % 3 == 1 ? 0 : n / 2);
                const bool keep = t % 4 == 1 ? single : t % 4 == 2 ? true : t % 4 == 3 && on(rng);
                if (keep) l.idx[t * n + k++] = static_cast<int32_t>(i);
            }
            l.count[t] = k;
        }
        return l;
    };
    struct edge_case {
        uint32_t type;
        int64_t k, rows;
        std::size_t offset;
    };
    // Quantized rows of an odd number of blocks (they alternate between 4-byte and 2-byte
    // starts) and of more than one 32-block step; a long list for the accumulate (n_ff = rows).
    const edge_case cases[] = {{F32, 67, 300, 32},    {F16, 136, 300, 34}, {Q4_0, 1056, 300, 34},
                               {Q8_0, 1056, 300, 32}, {Q4_0, 96, 41, 32},  {Q8_0, 288, 41, 34}};
    const bool joint = current().be[under_test].vt->mul_mat_sparse2 != nullptr;
    for (const edge_case& c : cases) {
        INFO(type_name(c.type) << " k=" << c.k << " rows=" << c.rows << " offset=" << c.offset);
        bench b;
        const lists l = edge_lists(c.rows);
        const twin idx = b.i32(c.rows, n_tok, l.idx);
        const twin count = b.i32(n_tok, 1, l.count);
        const twin w0 = b.typed(c.type, c.k, c.rows, random_floats(c.k * c.rows, 54), 0, c.offset);
        const twin w1 = b.typed(c.type, c.k, c.rows, random_floats(c.k * c.rows, 55), 1, c.offset);
        const twin x = b.f32(c.k, n_tok, random_floats(c.k * n_tok, 56));
        const twin y0 = b.f32(c.rows, n_tok, random_floats(c.rows * n_tok, 57));
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.mul_mat_sparse(ctx, &w0.at[s], &x.at[s], &idx.at[s], &count.at[s], &y0.at[s]);
        });
        b.expect_close(y0, tol_product(c.type), "mul_mat_sparse " + type_name(c.type));
        if (joint) {
            const twin p0 = b.f32(c.rows, n_tok, random_floats(c.rows * n_tok, 59));
            const twin p1 = b.f32(c.rows, n_tok, random_floats(c.rows * n_tok, 60));
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.mul_mat_sparse2(ctx, &w0.at[s], &w1.at[s], &x.at[s], &idx.at[s],
                                          &count.at[s], &p0.at[s], &p1.at[s]);
            });
            b.expect_close(p1, tol_product(c.type), "mul_mat_sparse2 " + type_name(c.type));
            CHECK(b.read(p0, under_test) == b.read(y0, under_test));
        }
        // ffn_down_t: the rows' n_ff = c.rows listed rows of c.k outputs, coefficients with
        // zeros among them.
        std::vector<float> a = random_floats(c.rows * n_tok, 61);
        for (std::size_t i = 0; i < a.size(); i += 5)
            a[i] = 0.0f;
        const twin at = b.f32(c.rows, n_tok, a);
        const twin acc = b.f32(c.k, n_tok, random_floats(c.k * n_tok, 62));
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.axpy_sparse(ctx, &w0.at[s], &at.at[s], &idx.at[s], &count.at[s], &acc.at[s]);
        });
        b.expect_close(acc, tol_reduction, "axpy_sparse " + type_name(c.type));
    }
}

TEST_CASE("axpy_sparse accumulates the listed rows with non-zero coefficients into y") {
    struct axpy_case {
        int64_t n_out, n_ff, tokens;
        std::size_t pad;    // elements, or blocks for quantized rows
        std::size_t offset; // of ffn_down_t in its buffer
    };
    // One token with a long list (the GPU splits it), prompt-sized batches, odd widths.
    const axpy_case float_axpy[] = {{67, 301, 1, 0, 32},
                                    {256, 2000, 1, 0, 32},
                                    {256, 301, 5, 3, 36},
                                    {131, 97, 40, 0, 32},
                                    {1000, 64, 3, 1, 32}};
    // Rows of ffn_down_t are quantized along n_out: whole blocks, an output width that is not a
    // multiple of the kernel's 256-column blocks (8 quantized blocks), rows of an odd number of
    // blocks (they alternate between 4-byte and 2-byte starts), the whole tensor at a 2-byte
    // offset.
    const axpy_case quant_axpy[] = {{96, 301, 1, 0, 32},  {256, 2000, 1, 0, 34},
                                    {288, 301, 5, 1, 32}, {160, 97, 40, 0, 34},
                                    {1024, 64, 3, 1, 34}, {2080, 70, 2, 0, 32}};
    struct typed_axpy {
        uint32_t type;
        std::span<const axpy_case> cases;
    };
    const typed_axpy types[] = {
        {F32, float_axpy}, {F16, float_axpy}, {Q4_0, quant_axpy}, {Q8_0, quant_axpy}};
    for (const auto& [type, cases] : types) {
        for (const axpy_case& c : cases) {
            bench b;
            const twin wt =
                b.typed(type, c.n_out, c.n_ff, random_floats(c.n_out * c.n_ff, 8), c.pad, c.offset);
            std::vector<float> a = random_floats(c.n_ff * c.tokens, 9);
            for (std::size_t i = 0; i < a.size(); i += 3)
                a[i] = 0.0f; // listed but inactive neurons are skipped
            const twin at = b.f32(c.n_ff, c.tokens, a);
            const lists l = make_lists(c.n_ff, c.tokens, 0.4, 10);
            const twin idx = b.i32(c.n_ff, c.tokens, l.idx);
            const twin count = b.i32(c.tokens, 1, l.count);
            const twin y = b.f32(c.n_out, c.tokens, random_floats(c.n_out * c.tokens, 11));
            b.run([&](const pib_vtable& vt, void* ctx, int s) {
                return vt.axpy_sparse(ctx, &wt.at[s], &at.at[s], &idx.at[s], &count.at[s],
                                      &y.at[s]);
            });
            INFO("n_out=" << c.n_out << " n_ff=" << c.n_ff << " tokens=" << c.tokens
                          << " offset=" << c.offset);
            b.expect_close(y, tol_reduction, "axpy_sparse " + type_name(type));
        }
    }
}

TEST_CASE("select_active lists the same neurons in ascending order with the same counts") {
    struct select_case {
        int64_t n, tokens;
        float threshold;
    };
    // Single and multiple passes of the GPU's 2048-element scan, nothing and everything active.
    const select_case cases[] = {
        {37, 3, 0.3f}, {1037, 4, 0.3f}, {5000, 2, 0.0f}, {2048, 2, 2.0f}, {4099, 3, -2.0f}};
    for (const select_case& c : cases) {
        bench b;
        const twin p = b.f32(c.n, c.tokens, random_floats(c.n * c.tokens, 12));
        const std::vector<int32_t> minus(static_cast<std::size_t>(c.n * c.tokens), -1);
        const twin idx = b.i32(c.n, c.tokens, minus);
        const twin count = b.i32(c.tokens, 1, std::vector<int32_t>(c.tokens, -1));
        b.run([&](const pib_vtable& vt, void* ctx, int s) {
            return vt.select_active(ctx, &p.at[s], c.threshold, &idx.at[s], &count.at[s]);
        });
        INFO("n=" << c.n << " tokens=" << c.tokens << " threshold=" << c.threshold);
        const std::vector<int32_t> got_n = b.read_i32(count, under_test);
        const std::vector<int32_t> want_n = b.read_i32(count, oracle);
        REQUIRE(got_n == want_n);
        const std::vector<int32_t> got = b.read_i32(idx, under_test);
        const std::vector<int32_t> want = b.read_i32(idx, oracle);
        for (int64_t t = 0; t < c.tokens; ++t) {
            const auto g = got.begin() + t * c.n;
            const auto w = want.begin() + t * c.n;
            CHECK(std::equal(g, g + want_n[t], w));
        }
    }
}
