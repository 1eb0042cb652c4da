// The activations of products with quantized weights (8-bit blocks of 32, or Q8_K super-blocks
// for the K-quants), and of F16 products on a level with FP16 arithmetic (binary16 rows), prepared
// once per call into the context's scratch; every output then depends only on its own row and
// token, so results are the same for any thread count and for a token decoded alone or inside a
// batch.
#include "cpu_parallel.hpp"
#include "fast_kernels.hpp"

namespace pi::cpu {

namespace {

// At least `bytes` of the context's grow-only, cache-line aligned activation scratch.
std::byte* scratch_bytes(context& c, std::size_t bytes) {
    const std::size_t lines = (bytes + sizeof(cache_line) - 1) / sizeof(cache_line);
    if (c.quant_x.size() < lines) c.quant_x.resize(lines);
    return reinterpret_cast<std::byte*>(c.quant_x.data());
}

} // namespace

quant_acts prepare_activations(context& c, wtype type, const view& x) {
    const int64_t blocks = x.ne0 / 32;
    const int64_t stride = quant_stride(blocks);
    const int64_t row = quant_block_bytes * stride;
    std::byte* out = scratch_bytes(c, static_cast<std::size_t>(row * x.ne1));
    const simd_kernels& k = *c.simd;
    parallel_1d(c, x.ne1, grain_for(x.ne0), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            k.prepare_q(type, x.row<const float>(t), blocks, stride, out + t * row);
    });
    return {out, stride};
}

half_acts prepare_half_activations(context& c, const view& x) {
    // Rows of whole cache lines, the scales after the last.
    const int64_t stride = (x.ne0 + 31) / 32 * 32;
    const auto row_bytes = static_cast<std::size_t>(stride) * sizeof(uint16_t);
    auto* out = reinterpret_cast<uint16_t*>(
        scratch_bytes(c, (row_bytes + sizeof(float)) * static_cast<std::size_t>(x.ne1)));
    float* scale = reinterpret_cast<float*>(out + stride * x.ne1);
    const simd_kernels& k = *c.simd;
    parallel_1d(c, x.ne1, grain_for(x.ne0), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            scale[t] = k.prepare_h(x.row<const float>(t), x.ne0, out + t * stride);
    });
    return {out, stride, scale};
}

k_acts prepare_k_activations(context& c, const view& x) {
    const int64_t blocks = x.ne0 / qk_k;
    auto* out = reinterpret_cast<block_q8_k*>(
        scratch_bytes(c, static_cast<std::size_t>(blocks * x.ne1) * sizeof(block_q8_k)));
    const simd_kernels& k = *c.simd;
    parallel_1d(c, x.ne1, grain_for(x.ne0), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            k.prepare_k(x.row<const float>(t), blocks, out + t * blocks);
    });
    return {out, blocks};
}

} // namespace pi::cpu
