// Reference quantizers, transcribed from ggml-quants.c. This file is compiled with
// -ffp-contract=off: fusing x * id + 8.5f into one FMA would round once instead of twice and
// change codes at the .5 boundaries.
#include "quant/quantize.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "quant/types.hpp"

namespace pi {

namespace {

// ggml's MIN(hi, (int8_t)v) for v >= -0.99 (truncation toward zero), without the undefined
// behaviour of converting NaN or a huge value: those clamp to 0 or hi.
uint8_t trunc_code(float v, int hi) noexcept {
    if (!(v > 0.0f)) return 0;
    if (v >= static_cast<float>(hi)) return static_cast<uint8_t>(hi);
    return static_cast<uint8_t>(static_cast<int>(v));
}

// The value with the largest magnitude, keeping its sign; the first one wins ties.
float signed_absmax(const float* x, int64_t n) noexcept {
    float amax = 0.0f;
    float max = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

struct min_max {
    float min, max;
};

min_max block_range(const float* x, int64_t n) noexcept {
    min_max r{FLT_MAX, -FLT_MAX};
    for (int64_t j = 0; j < n; ++j) {
        if (x[j] < r.min) r.min = x[j];
        if (x[j] > r.max) r.max = x[j];
    }
    return r;
}

float inverse(float d) noexcept {
    return d != 0.0f ? 1.0f / d : 0.0f;
}

} // namespace

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) noexcept {
    constexpr int64_t half = qk4_0 / 2;
    for (int64_t i = 0; i < n / qk4_0; ++i, x += qk4_0) {
        const float d = signed_absmax(x, qk4_0) / -8;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        for (int64_t j = 0; j < half; ++j) {
            const uint8_t lo = trunc_code(x[j] * id + 8.5f, 15);
            const uint8_t hi = trunc_code(x[half + j] * id + 8.5f, 15);
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n) noexcept {
    constexpr int64_t half = qk4_1 / 2;
    for (int64_t i = 0; i < n / qk4_1; ++i, x += qk4_1) {
        const min_max r = block_range(x, qk4_1);
        const float d = (r.max - r.min) / 15;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(r.min);
        for (int64_t j = 0; j < half; ++j) {
            const uint8_t lo = trunc_code((x[j] - r.min) * id + 0.5f, 15);
            const uint8_t hi = trunc_code((x[half + j] - r.min) * id + 0.5f, 15);
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

namespace {

// Packs 32 five-bit codes: low nibbles into qs, fifth bits into the little-endian u32 qh.
template <typename Block> void pack_q5(const uint8_t (&q)[32], Block& b) noexcept {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        b.qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
        qh |= static_cast<uint32_t>(q[j] >> 4) << j;
        qh |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; ++k)
        b.qh[k] = static_cast<uint8_t>(qh >> (8 * k));
}

} // namespace

void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk5_0; ++i, x += qk5_0) {
        const float d = signed_absmax(x, qk5_0) / -16;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        uint8_t q[32];
        for (int j = 0; j < 32; ++j)
            q[j] = trunc_code(x[j] * id + 16.5f, 31);
        pack_q5(q, y[i]);
    }
}

void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk5_1; ++i, x += qk5_1) {
        const min_max r = block_range(x, qk5_1);
        const float d = (r.max - r.min) / 31;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(r.min);
        uint8_t q[32];
        for (int j = 0; j < 32; ++j)
            q[j] = trunc_code((x[j] - r.min) * id + 0.5f, 31);
        pack_q5(q, y[i]);
    }
}

void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk8_0; ++i, x += qk8_0) {
        float amax = 0.0f;
        for (int64_t j = 0; j < qk8_0; ++j)
            amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        for (int64_t j = 0; j < qk8_0; ++j) {
            const float r = std::round(x[j] * id); // halves away from zero, as roundf
            y[i].qs[j] = std::isnan(r) ? 0 : static_cast<int8_t>(std::clamp(r, -128.0f, 127.0f));
        }
    }
}

} // namespace pi
