// The K-quant reference quantizers (ggml-quants.c quantize_row_q{2..6}_K_reference, QK_K = 256,
// without an importance matrix), float operation for float operation as ggml's x86-64 build
// computes them (docs/quantization.md). Compiled with -ffp-contract=off; the multiply-adds that
// build fuses are fused_multiply_add (fused.hpp) here and in quantize_k_search.cpp.
//
// Every super-block first fits each sub-block's own scale (and minimum), then stores those
// scales quantized against the super-block's binary16 d (and dmin), and finally requantizes the
// values against the stored scales. A sub-block whose stored scale is 0 keeps the codes of its
// own fit, as in ggml.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/fused.hpp"
#include "quant/quantize.hpp"
#include "quant/quantize_k_search.hpp"
#include "quant/types.hpp"

namespace pi {

using kquant::nearest_int;
using kquant::nearest_int_of_product;

namespace {

int clamp_int(int v, int lo, int hi) noexcept {
    return std::max(lo, std::min(hi, v));
}

// Four 2-bit codes a byte: bits 2k..2k+1 of byte l of each 128-element half hold element
// 32k + l of that half (Q2_K and Q3_K).
void pack_2bit(const uint8_t* L, uint8_t* qs) noexcept {
    for (int j = 0; j < qk_k; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 2 |
                                                 L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

// The 6-bit scale and minimum of sub-block j of a Q4_K/Q5_K super-block (ggml's
// get_scale_min_k4 layout): the first four whole in bytes 0..7, the last four split between the
// low nibbles of bytes 8..11 and the top two bits of bytes 0..7.
void put_scale_min(int j, uint8_t ls, uint8_t lm, uint8_t* s) noexcept {
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = static_cast<uint8_t>((ls & 0xf) | (lm & 0xf) << 4);
        s[j - 4] = static_cast<uint8_t>(s[j - 4] | (ls >> 4) << 6);
        s[j] = static_cast<uint8_t>(s[j] | (lm >> 4) << 6);
    }
}

void get_scale_min(int j, const uint8_t* s, uint8_t& sc, uint8_t& m) noexcept {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = static_cast<uint8_t>((s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4);
        m = static_cast<uint8_t>((s[j + 4] >> 4) | (s[j] >> 6) << 4);
    }
}

// Q4_K and Q5_K share everything up to the packing of the codes: 8 sub-blocks of 32, each fitted
// with a scale and a minimum under weights av + |x| (av the sub-block's RMS), the 6-bit scales
// and minimums against d = max scale / 63 and dmin = max min / 63.
template <typename Block>
void fit_super_block(const float* x, Block& y, uint8_t (&L)[qk_k], int nmax, float rmin,
                     int nstep) noexcept {
    uint8_t Laux[32];
    float weights[32];
    float scales[qk_k / 32];
    float mins[qk_k / 32];
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int j = 0; j < qk_k / 32; ++j) {
        const float* xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; ++l)
            sum_x2 += xs[l] * xs[l]; // not fused: ggml's build vectorizes the squares
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + std::fabs(xs[l]);
        scales[j] = kquant::fit_scale_min(32, nmax, xs, weights, L + 32 * j, mins[j], Laux, rmin,
                                          0.1f, nstep, false);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < qk_k / 32; ++j) {
        // uint8_t first, then capped: a negative fit wraps to a large code and is capped at 63.
        const auto ls = static_cast<uint8_t>(nearest_int_of_product(inv_scale, scales[j]));
        const auto lm = static_cast<uint8_t>(nearest_int_of_product(inv_min, mins[j]));
        put_scale_min(j, std::min<uint8_t>(63, ls), std::min<uint8_t>(63, lm), y.scales);
    }
    y.d = fp32_to_fp16(max_scale / 63.0f);
    y.dmin = fp32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < qk_k / 32; ++j) {
        uint8_t sc, m;
        get_scale_min(j, y.scales, sc, m);
        const float d = fp16_to_fp32(y.d) * static_cast<float>(sc);
        if (d == 0.0f) continue;
        const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(m);
        for (int ii = 0; ii < 32; ++ii)
            L[32 * j + ii] =
                static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
    }
}

} // namespace

PI_QUANT_FMA_CLONES void quantize_row_q2_k(const float* x, block_q2_k* y, int64_t n) noexcept {
    constexpr float q4scale = 15.0f;
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k];
        uint8_t Laux[16];
        float weights[16];
        float scales[qk_k / 16];
        float mins[qk_k / 16];
        float max_scale = 0.0f;
        float max_min = 0.0f;
        for (int j = 0; j < qk_k / 16; ++j) {
            for (int l = 0; l < 16; ++l)
                weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = kquant::fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, mins[j], Laux,
                                              -0.5f, 0.1f, 15, true);
            max_scale = std::max(max_scale, scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        block_q2_k& b = y[i];
        if (max_scale > 0.0f) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < qk_k / 16; ++j)
                b.scales[j] = static_cast<uint8_t>(nearest_int_of_product(iscale, scales[j]));
            b.d = fp32_to_fp16(max_scale / q4scale);
        } else {
            std::memset(b.scales, 0, sizeof b.scales);
            b.d = fp32_to_fp16(0.0f);
        }
        if (max_min > 0.0f) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < qk_k / 16; ++j) {
                const int l = nearest_int_of_product(iscale, mins[j]);
                b.scales[j] = static_cast<uint8_t>(b.scales[j] | l << 4);
            }
            b.dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            b.dmin = fp32_to_fp16(0.0f);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j] & 0xf);
            if (d == 0.0f) continue;
            const float dmin = fp16_to_fp32(b.dmin);
            const auto m = static_cast<float>(b.scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const float v = fused_multiply_add(dmin, m, x[16 * j + ii]); // x + dmin * m, fused
                L[16 * j + ii] = static_cast<uint8_t>(clamp_int(nearest_int(v / d), 0, 3));
            }
        }
        pack_2bit(L, b.qs);
    }
}

PI_QUANT_FMA_CLONES void quantize_row_q3_k(const float* x, block_q3_k* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        int8_t L[qk_k];
        float scales[qk_k / 16];
        float max_scale = 0.0f;
        float amax = 0.0f;
        for (int j = 0; j < qk_k / 16; ++j) {
            scales[j] = kquant::fit_symmetric_refined(16, 4, x + 16 * j, L + 16 * j);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        block_q3_k& b = y[i];
        // 16 six-bit scales, offset by 32: low nibbles in bytes 0..7 (sub-blocks 0..7 low, 8..15
        // high), the top two bits in bytes 8..11, sub-block j at bits 2 * (j / 4) of byte j % 4.
        std::memset(b.scales, 0, sizeof b.scales);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < qk_k / 16; ++j) {
                const auto q = static_cast<int8_t>(nearest_int_of_product(iscale, scales[j]));
                const int l = clamp_int(q, -32, 31) + 32;
                if (j < 8)
                    b.scales[j] = static_cast<uint8_t>(l & 0xf);
                else
                    b.scales[j - 8] = static_cast<uint8_t>(b.scales[j - 8] | (l & 0xf) << 4);
                b.scales[j % 4 + 8] =
                    static_cast<uint8_t>(b.scales[j % 4 + 8] | (l >> 4) << (2 * (j / 4)));
            }
            b.d = fp32_to_fp16(1.0f / iscale);
        } else {
            b.d = fp32_to_fp16(0.0f);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            const int lo = j < 8 ? b.scales[j] & 0xf : b.scales[j - 8] >> 4;
            const int sc = (lo | ((b.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
            const float d = fp16_to_fp32(b.d) * static_cast<float>(sc);
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = clamp_int(nearest_int(x[16 * j + ii] / d), -4, 3);
                L[16 * j + ii] = static_cast<int8_t>(l + 4);
            }
        }
        // The third bit of each code goes to hmask, inverted in meaning: set means code >= 4.
        // Element j sits in byte j % 32 at bit j / 32.
        std::memset(b.hmask, 0, sizeof b.hmask);
        uint8_t codes[qk_k];
        for (int j = 0; j < qk_k; ++j) {
            int l = L[j];
            if (l > 3) {
                b.hmask[j % 32] = static_cast<uint8_t>(b.hmask[j % 32] | 1 << (j / 32));
                l -= 4;
            }
            codes[j] = static_cast<uint8_t>(l);
        }
        pack_2bit(codes, b.qs);
    }
}

PI_QUANT_FMA_CLONES void quantize_row_q4_k(const float* x, block_q4_k* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k];
        fit_super_block(x, y[i], L, 15, -1.0f, 20);
        uint8_t* q = y[i].qs;
        for (int j = 0; j < qk_k; j += 64, q += 32)
            for (int l = 0; l < 32; ++l)
                q[l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 4);
    }
}

PI_QUANT_FMA_CLONES void quantize_row_q5_k(const float* x, block_q5_k* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k];
        fit_super_block(x, y[i], L, 31, -0.5f, 15);
        // Low nibbles as Q4_K; the fifth bit of group k of 64 at bit 2k (first 32) or 2k + 1.
        std::memset(y[i].qh, 0, sizeof y[i].qh);
        uint8_t* ql = y[i].qs;
        for (int g = 0; g < qk_k / 64; ++g, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[64 * g + j];
                int l2 = L[64 * g + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[i].qh[j] = static_cast<uint8_t>(y[i].qh[j] | 1 << (2 * g));
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[i].qh[j] = static_cast<uint8_t>(y[i].qh[j] | 2 << (2 * g));
                }
                ql[j] = static_cast<uint8_t>(l1 | l2 << 4);
            }
        }
    }
}

PI_QUANT_FMA_CLONES void quantize_row_q6_k(const float* x, block_q6_k* y, int64_t n) noexcept {
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        int8_t L[qk_k];
        float scales[qk_k / 16];
        float max_scale = 0.0f;
        float max_abs_scale = 0.0f;
        for (int ib = 0; ib < qk_k / 16; ++ib) {
            scales[ib] = kquant::fit_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
            const float abs_scale = std::fabs(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        block_q6_k& b = y[i];
        if (max_abs_scale == 0.0f) {
            std::memset(&b, 0, sizeof b);
            b.d = fp32_to_fp16(0.0f);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        b.d = fp32_to_fp16(1.0f / iscale);
        for (int ib = 0; ib < qk_k / 16; ++ib)
            b.scales[ib] =
                static_cast<int8_t>(std::min(127, nearest_int_of_product(iscale, scales[ib])));
        for (int j = 0; j < qk_k / 16; ++j) {
            const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j]);
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = clamp_int(nearest_int(x[16 * j + ii] / d), -32, 31);
                L[16 * j + ii] = static_cast<int8_t>(l + 32);
            }
        }
        // Low four bits in ql (elements l and l + 64 of each half share a byte, as l + 32 and
        // l + 96 do), the top two bits of elements l, l + 32, l + 64, l + 96 in qh[l].
        uint8_t* ql = b.ql;
        uint8_t* qh = b.qh;
        for (int j = 0; j < qk_k; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l] = static_cast<uint8_t>((q1 & 0xf) | (q3 & 0xf) << 4);
                ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | (q4 & 0xf) << 4);
                qh[l] = static_cast<uint8_t>(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 |
                                             (q4 >> 4) << 6);
            }
        }
    }
}

} // namespace pi
