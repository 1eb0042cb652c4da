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

// ---- K-quants (super-blocks of qk_k elements), as ggml's dequantize_row_q*_K ----

namespace {

// Sub-block j's six-bit scale and minimum of Q4_K and Q5_K: for j < 4 the low six bits of bytes
// j and j + 4; for j >= 4 a nibble of byte j + 4 topped by the two high bits of bytes j - 4 and j.
void k_scale_min(const uint8_t* s, int j, int& sc, int& m) noexcept {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
        m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

} // namespace

void dequantize_row_q2_k(const block_q2_k* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        const uint8_t* q = x[i].qs;
        int s = 0;
        for (int half = 0; half < 2; ++half, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int part = 0; part < 2; ++part, ++s) {
                    const float dl = d * static_cast<float>(x[i].scales[s] & 0x0f);
                    const float ml = dmin * static_cast<float>(x[i].scales[s] >> 4);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
                }
    }
}

void dequantize_row_q3_k(const block_q3_k* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const uint8_t* sb = x[i].scales;
        int scales[16];
        for (int j = 0; j < 16; ++j)
            scales[j] = (((sb[j % 8] >> (4 * (j / 8))) & 0x0f) |
                         ((sb[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) -
                        32;
        const uint8_t* q = x[i].qs;
        int s = 0, bit = 0;
        for (int half = 0; half < 2; ++half, q += 32)
            for (int shift = 0; shift < 8; shift += 2, ++bit)
                for (int part = 0; part < 2; ++part, ++s) {
                    const float dl = d * static_cast<float>(scales[s]);
                    for (int l = 16 * part; l < 16 * part + 16; ++l) {
                        const int low = (q[l] >> shift) & 3;
                        const int high = (x[i].hmask[l] >> bit) & 1 ? 0 : 4;
                        *y++ = dl * static_cast<float>(low - high);
                    }
                }
    }
}

void dequantize_row_q4_k(const block_q4_k* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int g = 0; g < 4; ++g) {
            const uint8_t* q = x[i].qs + 32 * g;
            for (int nib = 0; nib < 2; ++nib) {
                int sc, m;
                k_scale_min(x[i].scales, 2 * g + nib, sc, m);
                const float dl = d * static_cast<float>(sc);
                const float ml = dmin * static_cast<float>(m);
                for (int l = 0; l < 32; ++l)
                    *y++ = dl * static_cast<float>((q[l] >> (4 * nib)) & 0x0f) - ml;
            }
        }
    }
}

void dequantize_row_q5_k(const block_q5_k* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int g = 0; g < 4; ++g) {
            const uint8_t* q = x[i].qs + 32 * g;
            for (int nib = 0; nib < 2; ++nib) {
                const int j = 2 * g + nib;
                int sc, m;
                k_scale_min(x[i].scales, j, sc, m);
                const float dl = d * static_cast<float>(sc);
                const float ml = dmin * static_cast<float>(m);
                for (int l = 0; l < 32; ++l) {
                    const int code = ((q[l] >> (4 * nib)) & 0x0f) | ((x[i].qh[l] >> j) & 1) << 4;
                    *y++ = dl * static_cast<float>(code) - ml;
                }
            }
        }
    }
}

void dequantize_row_q6_k(const block_q6_k* x, float* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = x[i].ql + 64 * half;
            const uint8_t* qh = x[i].qh + 32 * half;
            const int8_t* sc = x[i].scales + 8 * half;
            float* out = y + 128 * i + 128 * half;
            // Quarter k of the half: low nibbles of ql[0..32), of ql[32..64), then the high
            // nibbles; the top two bits are bits 2k, 2k + 1 of qh.
            for (int k = 0; k < 4; ++k)
                for (int l = 0; l < 32; ++l) {
                    const int low = (ql[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0x0f;
                    const int code = (low | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
                    out[32 * k + l] = d * static_cast<float>(sc[2 * k + l / 16]) *
                                      static_cast<float>(code);
                }
        }
    }
}

} // namespace pi
