// The activations of products with quantized weights (8-bit blocks of 32, or Q8_K super-blocks
// for the K-quants), quantized once per call into the
// context's scratch; every output then depends only on its own row and token, so results are the
// same for any thread count and for a token decoded alone or inside a batch.
#include "cpu_parallel.hpp"
#include "fast_kernels.hpp"

namespace pi::cpu {

quant_acts prepare_activations(context& c, wtype type, const view& x) {
    const int64_t blocks = x.ne0 / 32;
    const int64_t stride = quant_stride(blocks);
    const int64_t row = quant_block_bytes * stride;
    const auto lines = static_cast<std::size_t>(row / 64 * x.ne1);
    if (c.quant_x.size() < lines) c.quant_x.resize(lines);
    auto* out = reinterpret_cast<std::byte*>(c.quant_x.data());
    const simd_kernels& k = *c.simd;
    parallel_1d(c, x.ne1, grain_for(x.ne0), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            k.prepare_q(type, x.row<const float>(t), blocks, stride, out + t * row);
    });
    return {out, stride};
}

k_acts prepare_k_activations(context& c, const view& x) {
    const int64_t blocks = x.ne0 / qk_k;
    const auto bytes = static_cast<std::size_t>(blocks * x.ne1) * sizeof(block_q8_k);
    const std::size_t lines = (bytes + sizeof(cache_line) - 1) / sizeof(cache_line);
    if (c.quant_x.size() < lines) c.quant_x.resize(lines);
    auto* out = reinterpret_cast<block_q8_k*>(c.quant_x.data());
    const simd_kernels& k = *c.simd;
    parallel_1d(c, x.ne1, grain_for(x.ne0), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            k.prepare_k(x.row<const float>(t), blocks, out + t * blocks);
    });
    return {out, blocks};
}

} // namespace pi::cpu
