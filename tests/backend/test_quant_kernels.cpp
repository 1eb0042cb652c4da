// mul_mat, mul_mat_sparse, axpy_sparse and get_rows on Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights and
// the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, at every kernel level this machine runs, against a
// "dequantize, then F32" oracle: the weights dequantized with traits_of(type).to_float into an F32
// tensor and the SCALAR kernel run on that.
//
// Tolerances, with scale = sum|w * x| over the dequantized weights:
// - scalar kernels: |got - oracle| <= 1e-5 * scale + 1e-6 (they dequantize block by block and
//   sum in the oracle's order, so in practice the bits agree; get_rows is checked bitwise);
// - fast kernels: |got - oracle| <= 1e-2 * scale + 1e-6, room for quantizing the activations to
//   8-bit blocks (a relative error of at most 1/254 per element) before integer dot products
//   (blocks of 32, or Q8_K super-blocks of 256 for Q4_K and Q6_K; the other K-quants run on the
//   reference kernels at every level, within the scalar tolerance).
// Every level gives the same bits on 1 and 2 threads, and a token the same bits alone or in a
// batch.
#include "backend_test_util.hpp"

#include "cpu/cpu_features.hpp"
#include "cpu/cpu_simd.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

using namespace pi::test;

namespace {

constexpr double scalar_rel = 1e-5;
constexpr double fast_rel = 1e-2;
constexpr double abs_tol = 1e-6;

constexpr uint32_t all_types[] = {Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K};

bool k_quant(uint32_t type) {
    return pi::traits_of(type).block_size == 256;
}

// A quantized matrix and its dequantized values, rows of `cols` elements.
struct quantized {
    std::vector<unsigned char> blocks;
    std::vector<float> values;
};

// Where of a K-quant block its binary16 scales lie (byte offsets).
std::vector<size_t> k_scale_offsets(uint32_t type) {
    switch (type) {
    case Q2_K:
        return {80, 82};
    case Q3_K:
        return {108};
    case Q6_K:
        return {208};
    default: // Q4_K, Q5_K
        return {0, 2};
    }
}

// K-quant blocks of random bytes whose binary16 scales are random in ±[2^-10, 2^-6): any codes,
// sub-block scales and minima, with values of about the size of the other types' (these tests
// check the kernels, not a quantizer).
std::vector<unsigned char> random_k_blocks(uint32_t type, size_t n_blocks, uint32_t seed) {
    const size_t size = pi::traits_of(type).type_size;
    std::mt19937 rng(seed);
    std::vector<unsigned char> out(size * n_blocks);
    for (auto& b : out)
        b = static_cast<unsigned char>(rng() & 0xff);
    const std::vector<size_t> halves = k_scale_offsets(type);
    for (size_t k = 0; k < n_blocks; ++k)
        for (size_t off : halves) {
            const uint32_t r = rng();
            const uint16_t h =
                static_cast<uint16_t>((r & 0x8000u) | (5u + (r >> 16) % 4) << 10 | (r & 0x3ffu));
            std::memcpy(out.data() + k * size + off, &h, sizeof h);
        }
    return out;
}

// Quantized by the type's quantizer, or for the K-quants random blocks.
quantized quantize(uint32_t type, int64_t cols, int64_t rows, uint32_t seed) {
    const size_t row = pi::row_bytes(static_cast<pi::ggml_type>(type), cols);
    const pi::type_traits tt = pi::traits_of(type);
    if (k_quant(type)) {
        quantized q{random_k_blocks(type, row / tt.type_size * static_cast<size_t>(rows), seed),
                    std::vector<float>(static_cast<size_t>(cols * rows))};
        for (int64_t r = 0; r < rows; ++r)
            tt.to_float(q.blocks.data() + row * r, q.values.data() + r * cols, cols);
        return q;
    }
    const auto src = random_floats(static_cast<size_t>(cols * rows), seed);
    quantized q{std::vector<unsigned char>(row * static_cast<size_t>(rows)), src};
    for (int64_t r = 0; r < rows; ++r) {
        tt.from_float(src.data() + r * cols, q.blocks.data() + row * r, cols);
        tt.to_float(q.blocks.data() + row * r, q.values.data() + r * cols, cols);
    }
    return q;
}

// One list per token, cycling through: every row ascending, empty, a random third ascending,
// every row descending. Sparse: a random tenth ascending, empty, a random tenth descending (under
// a quarter of the rows per token, so batches take axpy_sparse's token-major path).
std::vector<std::vector<int32_t>> make_lists(int64_t rows, int64_t n_tok, uint32_t seed,
                                             bool sparse = false) {
    std::mt19937 rng(seed);
    std::vector<std::vector<int32_t>> lists(static_cast<size_t>(n_tok));
    for (int64_t t = 0; t < n_tok; ++t) {
        const int kind = static_cast<int>(t % (sparse ? 3 : 4));
        for (int32_t r = 0; r < rows; ++r) {
            const bool listed = sparse ? kind != 1 && rng() % 10 == 0
                                       : kind == 0 || kind == 3 || (kind == 2 && rng() % 3 == 0);
            if (listed) lists[t].push_back(r);
        }
        if (kind == 3 || (sparse && kind == 2)) std::reverse(lists[t].begin(), lists[t].end());
    }
    return lists;
}

// Runs op with the weight tensor built by make_w at every level on 1 and 2 threads, checking
// each against `want` with the level's tolerance and the two thread counts bitwise.
template <class Op, class MakeW>
void check_against(uint32_t type, const std::vector<float>& want, const std::vector<double>& scale,
                   Op op, MakeW make_w) {
    const std::vector<double> w64(want.begin(), want.end());
    std::vector<int32_t> levels = fast_levels();
    levels.insert(levels.begin(), PIB_CPU_KERNELS_SCALAR);
    for (int32_t level : levels) {
        CAPTURE(level);
        const double rel = level == PIB_CPU_KERNELS_SCALAR ? scalar_rel : fast_rel;
        std::vector<float> got[2];
        for (int threads : {1, 2}) {
            cpu_device d(threads, 0, level);
            got[threads - 1] = op(d, make_w(d));
            check_close(got[threads - 1], w64, scale, rel, abs_tol);
        }
        CHECK(bitwise_equal(got[0], got[1]));
    }
}

// Batches of 3, 7 and 9 tokens cover full and partial register tiles of rows and tokens; 11
// and 19 blocks, rows longer than the dense products transpose at once; 2, 3 and 4 tokens the
// dense few-token kernels.
// For the K-quants (whole super-blocks): 1 to 9 tokens, and 20, past the sparse products'
// token-by-token limit.
const mat_shape shapes[] = {{32, 29, 1},  {64, 7, 3},   {96, 33, 7},  {256, 301, 1},
                            {160, 65, 3}, {128, 67, 9}, {352, 21, 5}, {608, 17, 1},
                            {96, 19, 2},  {352, 37, 4}, {160, 9, 3},  {608, 23, 8}};
const mat_shape k_shapes[] = {{256, 301, 1}, {512, 37, 3}, {768, 21, 9}, {256, 41, 20},
                              {1024, 17, 4}, {512, 13, 2}, {2048, 9, 1}};

std::span<const mat_shape> shapes_for(uint32_t type) {
    if (k_quant(type)) return k_shapes;
    return shapes;
}

// Two kernel tables of one architecture that must agree bit for bit (with and without a dot
// product instruction) on every quantized product of the types they take: a batch, one token
// alone, a sparse list, sparse batch lists, and a pair of matrices sharing the lists.
void check_same_quantized_bits(const pi::cpu::simd_kernels& a, const pi::cpu::simd_kernels& b) {
    using pi::cpu::wtype;
    const std::pair<uint32_t, wtype> types[] = {{Q4_0, wtype::q4_0},
                                                {Q4_1, wtype::q4_1},
                                                {Q5_0, wtype::q5_0},
                                                {Q5_1, wtype::q5_1},
                                                {Q8_0, wtype::q8_0}};
    const int64_t rows = 21, n_tok = 5;
    for (const auto& [type, wt] : types) {
        if ((a.weight_types >> static_cast<uint32_t>(wt) & 1u) == 0) continue;
        for (int64_t cols : {96, 256, 352}) { // 3 and 11 blocks: a last register of one block
            CAPTURE(type);
            CAPTURE(cols);
            const quantized q = quantize(type, cols, rows, 17), q2 = quantize(type, cols, rows, 19);
            const auto x = random_floats(static_cast<size_t>(cols * n_tok), 18);
            const size_t row_bytes = pi::row_bytes(static_cast<pi::ggml_type>(type), cols);
            const pi::cpu::weights w{reinterpret_cast<const std::byte*>(q.blocks.data()), row_bytes,
                                     cols, wt};
            const pi::cpu::weights pair[2] = {
                w, {reinterpret_cast<const std::byte*>(q2.blocks.data()), row_bytes, cols, wt}};
            // Rows 0, 2, 4, ... for every token, regrouped per row as the batch kernels take them.
            std::vector<int32_t> list, offsets = {0}, tokens;
            for (int32_t r = 0; r < rows; ++r) {
                if (r % 2 == 0) list.push_back(r);
                for (int32_t t = 0; r % 2 == 0 && t < n_tok; ++t)
                    tokens.push_back(t);
                offsets.push_back(static_cast<int32_t>(tokens.size()));
            }
            auto run = [&](const pi::cpu::simd_kernels& k) {
                const int64_t blocks = cols / 32, stride = pi::cpu::quant_stride(blocks);
                const int64_t row = pi::cpu::quant_block_bytes * stride;
                std::vector<pi::cpu::cache_line> acts(static_cast<size_t>(row / 64 * n_tok));
                auto* base = reinterpret_cast<std::byte*>(acts.data());
                for (int64_t t = 0; t < n_tok; ++t)
                    k.prepare_q(wt, x.data() + t * cols, blocks, stride, base + t * row);
                const pi::cpu::quant_acts xa{base, stride};
                // A batch, one token alone, a sparse list, sparse batch lists, and the pair.
                std::vector<float> out(static_cast<size_t>(5 * rows * n_tok + rows), 0.0f);
                k.mul_mat_q(w, 0, rows, xa, n_tok, {out.data(), rows * sizeof(float)});
                k.mul_mat_q(w, 0, rows, xa, 1,
                            {out.data() + 3 * rows * n_tok, rows * sizeof(float)});
                k.mul_rows_q(w, list.data(), static_cast<int64_t>(list.size()), xa,
                             out.data() + rows * n_tok);
                const pi::cpu::f32_rows_out one = {out.data() + 2 * rows * n_tok,
                                                   rows * sizeof(float)};
                k.mul_rows_batch_q(&w, 1, 0, rows, offsets.data(), tokens.data(), xa, &one);
                const pi::cpu::f32_rows_out two[2] = {
                    {out.data() + 4 * rows * n_tok + rows, rows * sizeof(float)},
                    {out.data() + 3 * rows * n_tok + rows, rows * sizeof(float)}};
                k.mul_rows_batch_q(pair, 2, 0, rows, offsets.data(), tokens.data(), xa, two);
                return out;
            };
            CHECK(bitwise_equal(run(a), run(b)));
        }
    }
}

} // namespace

TEST_CASE("mul_mat on quantized weights matches the F32 kernel on the dequantized weights") {
    for (uint32_t type : all_types) {
        for (const mat_shape& s : shapes_for(type)) {
            CAPTURE(type);
            CAPTURE(s.cols);
            CAPTURE(s.rows);
            CAPTURE(s.n_tok);
            const quantized q = quantize(type, s.cols, s.rows, 1);
            const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tok), 2);
            auto op = [&](cpu_device& d, const pib_tensor& w) {
                const pib_tensor tx = d.f32(s.cols, s.n_tok, x, 3);
                const pib_tensor ty = d.zeros_f32(s.rows, s.n_tok, 5);
                REQUIRE(d.vt().mul_mat(d.ctx(), &w, &tx, &ty) == PIB_OK);
                return d.read_f32(ty);
            };
            cpu_device oracle(1, 0, PIB_CPU_KERNELS_SCALAR);
            const auto want = op(oracle, oracle.f32(s.cols, s.rows, q.values));
            check_against(
                type, want, product_scale(q.values, x, s.cols, s.rows, s.n_tok), op,
                [&](cpu_device& d) { return d.raw(type, s.cols, s.rows, q.blocks.data(), 2); });
        }
    }
}

TEST_CASE("mul_mat_sparse on quantized weights matches the F32 kernel, empty and full lists") {
    for (uint32_t type : all_types) {
        for (const mat_shape& s : shapes_for(type)) {
            CAPTURE(type);
            CAPTURE(s.rows);
            CAPTURE(s.n_tok);
            const quantized q = quantize(type, s.cols, s.rows, 3);
            const auto x = random_floats(static_cast<size_t>(s.cols * s.n_tok), 4);
            const auto lists = make_lists(s.rows, s.n_tok, 5);
            auto op = [&](cpu_device& d, const pib_tensor& w) {
                const pib_tensor tx = d.f32(s.cols, s.n_tok, x);
                const auto l = upload_lists(d, lists, s.rows + 1);
                const auto init = random_floats(static_cast<size_t>(s.rows * s.n_tok), 6);
                const pib_tensor ty = d.f32(s.rows, s.n_tok, init); // unlisted rows become 0
                REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &w, &tx, &l.idx, &l.count, &ty) == PIB_OK);
                return d.read_f32(ty);
            };
            cpu_device oracle(1, 0, PIB_CPU_KERNELS_SCALAR);
            const auto want = op(oracle, oracle.f32(s.cols, s.rows, q.values));
            check_against(
                type, want, product_scale(q.values, x, s.cols, s.rows, s.n_tok), op,
                [&](cpu_device& d) { return d.raw(type, s.cols, s.rows, q.blocks.data()); });
        }
    }
}

TEST_CASE("axpy_sparse over quantized rows matches the F32 kernel, skipping zero activations") {
    // wt [cols][rows]: list entries index its rows, y gets `cols` columns per token.
    for (uint32_t type : all_types) {
        for (const mat_shape& s : shapes_for(type)) {
            CAPTURE(type);
            CAPTURE(s.cols);
            CAPTURE(s.rows);
            CAPTURE(s.n_tok);
            const quantized q = quantize(type, s.cols, s.rows, 7);
            auto a = random_floats(static_cast<size_t>(s.rows * s.n_tok), 8);
            for (size_t i = 0; i < a.size(); i += 5)
                a[i] = 0.0f;
            for (bool sparse : {false, true}) {
                CAPTURE(sparse);
                const auto lists = make_lists(s.rows, s.n_tok, 9, sparse);
                const auto y0 = random_floats(static_cast<size_t>(s.cols * s.n_tok), 10);
                auto op = [&](cpu_device& d, const pib_tensor& wt) {
                    const pib_tensor ta = d.f32(s.rows, s.n_tok, a);
                    const auto l = upload_lists(d, lists, s.rows);
                    const pib_tensor ty = d.f32(s.cols, s.n_tok, y0, 7);
                    REQUIRE(d.vt().axpy_sparse(d.ctx(), &wt, &ta, &l.idx, &l.count, &ty) == PIB_OK);
                    return d.read_f32(ty);
                };
                // scale[t][j] = |y0| + sum over listed rows of |a * w|.
                std::vector<double> scale(y0.begin(), y0.end());
                for (int64_t t = 0; t < s.n_tok; ++t) {
                    for (int64_t j = 0; j < s.cols; ++j)
                        scale[t * s.cols + j] = std::fabs(scale[t * s.cols + j]);
                    for (int32_t r : lists[t])
                        for (int64_t j = 0; j < s.cols; ++j)
                            scale[t * s.cols + j] += std::fabs(
                                static_cast<double>(a[t * s.rows + r]) * q.values[r * s.cols + j]);
                }
                cpu_device oracle(1, 0, PIB_CPU_KERNELS_SCALAR);
                const auto want = op(oracle, oracle.f32(s.cols, s.rows, q.values));
                check_against(type, want, scale, op, [&](cpu_device& d) {
                    return d.raw(type, s.cols, s.rows, q.blocks.data(), 1);
                });
            }
        }
    }
}

TEST_CASE("get_rows dequantizes quantized table rows exactly as traits_of().to_float") {
    for (uint32_t type : all_types) {
        for (int64_t cols0 : {32, 96, 4160}) {
            const int64_t cols = k_quant(type) ? cols0 / 32 * 256 : cols0;
            CAPTURE(type);
            CAPTURE(cols);
            const int64_t rows = 11;
            const quantized q = quantize(type, cols, rows, 11);
            const std::vector<int32_t> ids = {10, 0, 3, 3, 7};
            std::vector<float> want;
            for (int32_t id : ids)
                want.insert(want.end(), q.values.begin() + id * cols,
                            q.values.begin() + (id + 1) * cols);
            std::vector<int32_t> levels = fast_levels();
            levels.insert(levels.begin(), PIB_CPU_KERNELS_SCALAR);
            for (int32_t level : levels)
                for (int threads : {1, 2}) {
                    CAPTURE(level);
                    CAPTURE(threads);
                    cpu_device d(threads, 0, level);
                    const pib_tensor table = d.raw(type, cols, rows, q.blocks.data(), 3);
                    const pib_tensor tids = d.i32(5, 1, ids);
                    const pib_tensor out = d.zeros_f32(cols, 5, 2);
                    REQUIRE(d.vt().get_rows(d.ctx(), &table, &tids, &out) == PIB_OK);
                    CHECK(bitwise_equal(d.read_f32(out), want));
                }
        }
    }
}

TEST_CASE("a token gets the same bits from the quantized kernels decoded alone or in a batch") {
    const int64_t rows = 37, n_tok = 9;
    for (uint32_t type : all_types)
        for (int64_t cols0 : {96, 352}) {
            const int64_t cols = k_quant(type) ? cols0 / 32 * 256 : cols0;
            const quantized q = quantize(type, cols, rows, 12);
            const quantized qt = quantize(type, cols, rows, 13);
            const auto x = random_floats(static_cast<size_t>(cols * n_tok), 14);
            const auto a = random_floats(static_cast<size_t>(rows * n_tok), 15);
            for (bool sparse : {false, true}) {
                CAPTURE(sparse);
                // Ascending lists, as select_active makes them: a descending one sums ffn_down_t's
                // rows in another order when decoded alone.
                auto lists = make_lists(rows, n_tok, 16, sparse);
                for (auto& l : lists)
                    std::sort(l.begin(), l.end());
                // Results of token t run in a batch of `n` tokens starting at `first`.
                auto run = [&](cpu_device& d, int64_t first, int64_t n) {
                    const pib_tensor w = d.raw(type, cols, rows, q.blocks.data());
                    const pib_tensor wt = d.raw(type, cols, rows, qt.blocks.data());
                    const std::span<const float> xs(x.data() + first * cols,
                                                    static_cast<size_t>(n * cols));
                    const std::span<const float> as(a.data() + first * rows,
                                                    static_cast<size_t>(n * rows));
                    const pib_tensor tx = d.f32(cols, n, xs);
                    const pib_tensor ta = d.f32(rows, n, as);
                    const auto l =
                        upload_lists(d,
                                     std::vector<std::vector<int32_t>>(lists.begin() + first,
                                                                       lists.begin() + first + n),
                                     rows);
                    const pib_tensor dense = d.zeros_f32(rows, n);
                    const pib_tensor sparse = d.zeros_f32(rows, n);
                    const pib_tensor acc = d.zeros_f32(cols, n);
                    const pib_tensor pair0 = d.zeros_f32(rows, n), pair1 = d.zeros_f32(rows, n);
                    REQUIRE(d.vt().mul_mat(d.ctx(), &w, &tx, &dense) == PIB_OK);
                    REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &w, &tx, &l.idx, &l.count, &sparse) ==
                            PIB_OK);
                    REQUIRE(d.vt().axpy_sparse(d.ctx(), &wt, &ta, &l.idx, &l.count, &acc) ==
                            PIB_OK);
                    REQUIRE(d.vt().mul_mat_sparse2(d.ctx(), &w, &wt, &tx, &l.idx, &l.count, &pair0,
                                                   &pair1) == PIB_OK);
                    // Each matrix of a pair gets the bits it gets alone.
                    CHECK(bitwise_equal(d.read_f32(pair0), d.read_f32(sparse)));
                    auto out = d.read_f32(dense);
                    for (const pib_tensor* t : {&sparse, &acc, &pair1}) {
                        const auto v = d.read_f32(*t);
                        out.insert(out.end(), v.begin(), v.end());
                    }
                    return out;
                };
                for (int32_t level : fast_levels()) {
                    CAPTURE(type);
                    CAPTURE(cols);
                    CAPTURE(level);
                    cpu_device d(2, 0, level);
                    std::vector<std::vector<float>> alone;
                    for (int64_t t = 0; t < n_tok; ++t)
                        alone.push_back(run(d, t, 1));
                    // Batches of 2 to 4 tokens take the dense few-token kernels, more the panels.
                    for (int64_t n = 2; n <= n_tok; ++n) {
                        CAPTURE(n);
                        const auto batch = run(d, 0, n);
                        for (int64_t t = 0; t < n; ++t) {
                            CAPTURE(t);
                            std::vector<float> from_batch;
                            const int64_t lens[] = {rows, rows, cols, rows};
                            int64_t base = 0;
                            for (int64_t len : lens) {
                                from_batch.insert(from_batch.end(), batch.begin() + base + t * len,
                                                  batch.begin() + base + (t + 1) * len);
                                base += len * n;
                            }
                            CHECK(bitwise_equal(alone[static_cast<size_t>(t)], from_batch));
                        }
                    }
                }
            }
        }
}

TEST_CASE("the AVX-512 quantized products give the same bits with and without VNNI") {
#if defined(__x86_64__)
    if (!pi::cpu::kernels_supported(PIB_CPU_KERNELS_AVX512) ||
        !__builtin_cpu_supports("avx512vnni")) {
        MESSAGE("skipped: this CPU lacks AVX-512 VNNI");
        return;
    }
    check_same_quantized_bits(pi::cpu::avx512_kernels(), pi::cpu::avx512_vnni_kernels());
#else
    MESSAGE("skipped: not an x86-64 build");
#endif
}

TEST_CASE("the NEON levels give the same bits for the quantized products: neon, sdot, fp16") {
#if defined(__aarch64__)
    if (!pi::cpu::kernels_supported(PIB_CPU_KERNELS_NEON_DOTPROD)) {
        MESSAGE("skipped: this CPU lacks the dot-product extension");
        return;
    }
    check_same_quantized_bits(pi::cpu::neon_kernels(), pi::cpu::neon_dotprod_kernels());
    if (pi::cpu::kernels_supported(PIB_CPU_KERNELS_NEON_FP16))
        check_same_quantized_bits(pi::cpu::neon_dotprod_kernels(), pi::cpu::neon_fp16_kernels());
    else
        MESSAGE("neon_fp16 not compared: this CPU lacks FP16 arithmetic or FEAT_FHM");
#else
    MESSAGE("skipped: not an AArch64 build");
#endif
}

TEST_CASE("K-quant row-sparse products give the dense product's bits on the listed rows") {
    // The Q4_K and Q6_K kernels compute every (row, token) product in one way, so a sparse
    // product with every row listed is the dense one, bit for bit, alone and in a batch.
    const int64_t rows = 29;
    for (uint32_t type : {Q4_K, Q6_K})
        for (int64_t cols : {256, 1280})
            for (int64_t n_tok : {1, 3, 20}) {
                CAPTURE(type);
                CAPTURE(cols);
                CAPTURE(n_tok);
                const quantized q = quantize(type, cols, rows, 21);
                const auto x = random_floats(static_cast<size_t>(cols * n_tok), 22);
                std::vector<std::vector<int32_t>> lists(static_cast<size_t>(n_tok));
                for (auto& l : lists)
                    for (int32_t r = 0; r < rows; ++r)
                        l.push_back(r);
                for (int32_t level : fast_levels()) {
                    CAPTURE(level);
                    cpu_device d(2, 0, level);
                    const pib_tensor w = d.raw(type, cols, rows, q.blocks.data());
                    const pib_tensor tx = d.f32(cols, n_tok, x);
                    const auto l = upload_lists(d, lists, rows);
                    const pib_tensor dense = d.zeros_f32(rows, n_tok);
                    const pib_tensor sparse = d.zeros_f32(rows, n_tok);
                    REQUIRE(d.vt().mul_mat(d.ctx(), &w, &tx, &dense) == PIB_OK);
                    REQUIRE(d.vt().mul_mat_sparse(d.ctx(), &w, &tx, &l.idx, &l.count, &sparse) ==
                            PIB_OK);
                    CHECK(bitwise_equal(d.read_f32(dense), d.read_f32(sparse)));
                }
            }
}
