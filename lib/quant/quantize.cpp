// Reference quantizers of the 32-element formats, as ggml-quants.c quantize_row_*_reference
// computes them when built the way ggml builds itself on x86-64 (docs/quantization.md): GCC
// fuses x * id + 8.5f (and the like) into one fused multiply-add, so the code is rounded once.
// That fusion is spelled out with fused_multiply_add (fused.hpp) here and the file is compiled with
// -ffp-contract=off, so that no other operation is fused and the result does not depend on our
// compiler's choices.
#include "quant/quantize.hpp"

#include <cfloat>
#include <cmath>

#include "quant/fused.hpp"
#include "quant/types.hpp"

namespace pi {

namespace {

// ggml converts the float codes with a plain C cast, which on x86-64 is cvttss2si: truncation
// toward zero into an int32, INT32_MIN for NaN and values out of range, and then the low byte.
// Only inputs ggml leaves undefined (NaN, a scale whose inverse overflows) reach the edge cases.
uint8_t x86_low_byte(float v) noexcept {
    const bool in_range = v > -2147483904.0f && v < 2147483648.0f;
    const int32_t i = in_range ? static_cast<int32_t>(v) : INT32_MIN;
    return static_cast<uint8_t>(i);
}

// MIN(hi, (int8_t)v) stored into a uint8_t, as ggml writes it.
uint8_t capped_code(float v, int hi) noexcept {
    const int code = static_cast<int8_t>(x86_low_byte(v));
    return static_cast<uint8_t>(code < hi ? code : hi);
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

// Packs 32 five-bit codes: low nibbles into qs, fifth bits into the little-endian u32 qh.
template <typename Block> void pack_q5(const uint8_t (&q)[32], Block& b) noexcept {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        b.qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
        qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
        qh |= static_cast<uint32_t>((q[j + 16] & 0x10) >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; ++k)
        b.qh[k] = static_cast<uint8_t>(qh >> (8 * k));
}

} // namespace

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) noexcept {
    constexpr int64_t half = qk4_0 / 2;
    for (int64_t i = 0; i < n / qk4_0; ++i, x += qk4_0) {
        const float d = signed_absmax(x, qk4_0) / -8;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        for (int64_t j = 0; j < half; ++j) {
            const uint8_t lo = capped_code(fused_multiply_add(x[j], id, 8.5f), 15);
            const uint8_t hi = capped_code(fused_multiply_add(x[half + j], id, 8.5f), 15);
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4); // unmasked, as ggml
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
            const uint8_t lo = capped_code(fused_multiply_add(x[j] - r.min, id, 0.5f), 15);
            const uint8_t hi = capped_code(fused_multiply_add(x[half + j] - r.min, id, 0.5f), 15);
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk5_0; ++i, x += qk5_0) {
        const float d = signed_absmax(x, qk5_0) / -16;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        uint8_t q[32];
        for (int j = 0; j < 32; ++j)
            q[j] = capped_code(fused_multiply_add(x[j], id, 16.5f), 31);
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
        for (int j = 0; j < 32; ++j) // no cap here in ggml: (uint8_t)(x0 + 0.5f)
            q[j] = x86_low_byte(fused_multiply_add(x[j] - r.min, id, 0.5f));
        pack_q5(q, y[i]);
    }
}

void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk8_0; ++i, x += qk8_0) {
        float amax = 0.0f;
        for (int64_t j = 0; j < qk8_0; ++j) {
            const float a = std::fabs(x[j]);
            amax = amax > a ? amax : a; // ggml's MAX: a NaN element is taken, not skipped
        }
        const float d = amax / 127;
        const float id = inverse(d);
        y[i].d = fp32_to_fp16(d);
        for (int64_t j = 0; j < qk8_0; ++j) // roundf: halves away from zero; no fusion here
            y[i].qs[j] = static_cast<int8_t>(x86_low_byte(std::round(x[j] * id)));
    }
}

} // namespace pi
