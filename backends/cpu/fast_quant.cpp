// Products and sparse accumulates of the fast kernels on Q4_0 and Q8_0 weights. Each token's
// activation row is quantized to Q8_0 once per call (lib/quant's reference quantizer, into the
// context's grow-only scratch); every output then depends only on its own row and token, so
// results are the same for any thread count and for a token decoded alone or inside a batch.
#include "cpu_parallel.hpp"
#include "fast_kernels.hpp"
#include "quant/quantize.hpp"

#include <algorithm>
#include <cstring>

namespace pi::cpu {

namespace {

// Bytes of weights one task streams at least (as fast_matmul.cpp's decode tasks).
constexpr int64_t task_bytes = 64 << 10;
// Bytes of weight rows a prompt-batch task keeps in the L2 cache while all tokens pass.
constexpr int64_t batch_task_bytes = 256 << 10;

quant_weights quant_weights_of(const view& w) {
    return quant_weights{w.base, w.nb1, w.ne0 / qk8_0, w.is(ggml_type::q8_0)};
}

int64_t rows_for(const view& w, int64_t bytes) {
    const int64_t row = static_cast<int64_t>(row_bytes(static_cast<ggml_type>(w.type), w.ne0));
    return std::max<int64_t>(1, bytes / std::max<int64_t>(1, row));
}

// x's rows quantized to Q8_0, x.ne0 / 32 blocks per token.
const block_q8_0* quantized_activations(context& c, const view& x) {
    const int64_t blocks = x.ne0 / qk8_0;
    const auto need = static_cast<std::size_t>(blocks * x.ne1);
    if (c.quant_x.size() < need) c.quant_x.resize(need);
    block_q8_0* out = c.quant_x.data();
    parallel_1d(c, x.ne1, grain_for(x.ne0), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            quantize_row_q8_0(x.row<const float>(t), out + t * blocks, x.ne0);
    });
    return out;
}

} // namespace

int fast_mul_mat_q(context& c, const view& w, const view& x, const view& y) {
    const simd_kernels& k = *c.simd;
    const quant_weights qw = quant_weights_of(w);
    const block_q8_0* xq = quantized_activations(c, x);
    const int64_t rows = w.ne1;
    if (x.ne1 == 1) {
        const int64_t chunk = chunk_size(c, rows, rows_for(w, task_bytes), rows, 8);
        parallel_chunks(c, rows, chunk, [&](int64_t r0, int64_t r1) {
            k.mul_rows_q(qw, nullptr, r0, r1 - r0, xq, y.row<float>(0));
        });
        return PIB_OK;
    }
    // A prompt batch: each task keeps its rows in the L2 cache while register tiles of tokens
    // pass over them, each weight block unpacked once per tile instead of once per token.
    const int64_t chunk = chunk_size(c, rows, 8, rows_for(w, batch_task_bytes), 8);
    parallel_chunks(c, rows, chunk, [&](int64_t r0, int64_t r1) {
        k.mul_mat_q(qw, r0, r1, xq, x.ne1, f32_rows_out{y.row<float>(0), y.nb1});
    });
    return PIB_OK;
}

int fast_mul_mat_sparse_q(context& c, const view& w, const view& x, const view& idx,
                          const view& count, const view& y) {
    const simd_kernels& k = *c.simd;
    const quant_weights qw = quant_weights_of(w);
    const block_q8_0* xq = quantized_activations(c, x);
    const int32_t* n = count.row<const int32_t>(0);
    for (int64_t t = 0; t < x.ne1; ++t) {
        float* out = y.row<float>(t);
        std::memset(out, 0, static_cast<std::size_t>(y.ne0) * sizeof(float));
        const int32_t* list = idx.row<const int32_t>(t);
        const int64_t chunk = chunk_size(c, n[t], rows_for(w, task_bytes), n[t], 8, 2);
        parallel_chunks(c, n[t], chunk, [&](int64_t k0, int64_t k1) {
            k.mul_rows_q(qw, list + k0, 0, k1 - k0, xq + t * qw.blocks, out);
        });
    }
    return PIB_OK;
}

int fast_axpy_sparse_q(context& c, const view& wt, const view& a, const view& idx,
                       const view& count, const view& y) {
    const simd_kernels& k = *c.simd;
    const quant_weights qw = quant_weights_of(wt);
    const int32_t* n = count.row<const int32_t>(0);
    // Column blocks split across threads, two per thread, each walking the whole list in order.
    const int64_t chunk = chunk_size(c, qw.blocks, 2, qw.blocks, 1, 2);
    for (int64_t t = 0; t < a.ne1; ++t) {
        const int32_t* list = idx.row<const int32_t>(t);
        const float* at = a.row<const float>(t);
        float* out = y.row<float>(t);
        parallel_chunks(c, qw.blocks, chunk, [&](int64_t b0, int64_t b1) {
            k.axpy_rows_q(qw, list, n[t], at, out, b0, b1);
        });
    }
    return PIB_OK;
}

} // namespace pi::cpu
