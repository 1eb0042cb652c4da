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
    {200, 70, 33, 0, 32}, {1000, 17, 2, 0, 32},  {0, 5, 3, 0, 32},
};

// Whole blocks per row: fewer quarter blocks than a group has lanes (k = 32, 96), a lane that
// takes a second step (k = 288: 36 quarters), long rows; odd row counts; token counts on both
// sides of the batch switch; rows padded by whole blocks; weights at 2-byte but not 4-byte
// aligned offsets.
const product_case quant_cases[] = {
    {32, 33, 1, 0, 32},  {96, 65, 1, 0, 34},   {288, 129, 1, 1, 32},
    {256, 70, 3, 2, 34}, {1024, 17, 5, 0, 32}, {288, 130, 16, 0, 32},
    {96, 70, 37, 1, 34}, {256, 65, 67, 0, 32}, {0, 5, 3, 0, 32},
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
            b.expect_close(y, tol_product(type), label("mul_mat", type, c));
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

TEST_CASE("axpy_sparse accumulates the listed rows with non-zero coefficients into y") {
    struct axpy_case {
        int64_t n_out, n_ff, tokens;
        std::size_t pad; // elements, or blocks for quantized rows
    };
    // One token with a long list (the GPU splits it), prompt-sized batches, odd widths.
    const axpy_case float_axpy[] = {
        {67, 301, 1, 0}, {256, 2000, 1, 0}, {256, 301, 5, 3}, {131, 97, 40, 0}, {1000, 64, 3, 1}};
    // Rows of ffn_down_t are quantized along n_out: whole blocks, an output width that is not a
    // multiple of the kernel's 256-column blocks.
    const axpy_case quant_axpy[] = {
        {96, 301, 1, 0}, {256, 2000, 1, 0}, {288, 301, 5, 1}, {160, 97, 40, 0}, {1024, 64, 3, 1}};
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
                b.typed(type, c.n_out, c.n_ff, random_floats(c.n_out * c.n_ff, 8), c.pad);
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
            INFO("n_out=" << c.n_out << " n_ff=" << c.n_ff << " tokens=" << c.tokens);
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
