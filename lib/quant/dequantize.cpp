// Reference dequantizers, as ggml-quants.c dequantize_row_*. Compiled with -ffp-contract=off so
// that q * d + m rounds twice, like ggml's reference and gguf-py.
#include "quant/quantize.hpp"

#include "quant/types.hpp"

namespace pi {

void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n) noexcept {
    constexpr int64_t half = qk4_0 / 2;
    for (int64_t i = 0; i < n / qk4_0; ++i, y += qk4_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int64_t j = 0; j < half; ++j) {
            y[j] = static_cast<float>((x[i].qs[j] & 0x0f) - 8) * d;
            y[half + j] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n) noexcept {
    constexpr int64_t half = qk4_1 / 2;
    for (int64_t i = 0; i < n / qk4_1; ++i, y += qk4_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int64_t j = 0; j < half; ++j) {
            y[j] = static_cast<float>(x[i].qs[j] & 0x0f) * d + m;
            y[half + j] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
        }
    }
}

namespace {

// The 32 five-bit codes of a Q5 block.
template <typename Block> void unpack_q5(const Block& b, int (&q)[32]) noexcept {
    const uint32_t qh = static_cast<uint32_t>(b.qh[0]) | static_cast<uint32_t>(b.qh[1]) << 8 |
                        static_cast<uint32_t>(b.qh[2]) << 16 | static_cast<uint32_t>(b.qh[3]) << 24;
    for (int j = 0; j < 16; ++j) {
        q[j] = (b.qs[j] & 0x0f) | static_cast<int>((qh >> j) & 1u) << 4;
        q[j + 16] = (b.qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    }
}

} // namespace

void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk5_0; ++i, y += qk5_0) {
        const float d = fp16_to_fp32(x[i].d);
        int q[32];
        unpack_q5(x[i], q);
        for (int j = 0; j < 32; ++j)
            y[j] = static_cast<float>(q[j] - 16) * d;
    }
}

void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk5_1; ++i, y += qk5_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        int q[32];
        unpack_q5(x[i], q);
        for (int j = 0; j < 32; ++j)
            y[j] = static_cast<float>(q[j]) * d + m;
    }
}

void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk8_0; ++i, y += qk8_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int64_t j = 0; j < qk8_0; ++j)
            y[j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

} // namespace pi
