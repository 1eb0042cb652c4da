// The neon_fp16 level: the neon_dotprod table, with F16 weights multiplied in FP16 arithmetic
// (FEAT_FP16 and FEAT_FHM, compiled with them enabled for this file only). The activations are
// rounded to binary16 once per product (prepare_h, scaled by a power of two so that none
// overflows), and fmlal multiplies eight weight and activation halves exactly and adds the
// products into float lanes: half the instructions of widening the weights to F32, at the cost
// of one binary16 rounding of each activation (relative error at most 2^-11, docs/arm64.md).
#include "simd_neon_impl.hpp"

#include <algorithm>
#include <cmath>

namespace pi::cpu {

namespace {

struct sdot {
    static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
};

using base = simd::neon_impl<sdot>;

const float16_t* halves(const void* p) {
    return static_cast<const float16_t*>(p);
}

// The exponent that brings a largest magnitude into [2^14, 2^15); 0 for a row of zeros, NaN or
// infinity (those go through the rounding as they are). Not below -110, so 2^-e stays a float.
int scale_exponent(float amax) {
    if (!(amax > 0.0f) || !std::isfinite(amax)) return 0;
    return std::max(std::ilogb(amax) - 14, -110);
}

float prepare_h(const float* x, int64_t n, uint16_t* out) {
    float32x4_t amax = vdupq_n_f32(0.0f);
    int64_t c = 0;
    for (; c + 4 <= n; c += 4)
        amax = vmaxq_f32(amax, vabsq_f32(vld1q_f32(x + c)));
    float m = vmaxvq_f32(amax);
    for (; c < n; ++c)
        m = std::fmax(m, std::fabs(x[c]));
    const int e = scale_exponent(m);
    const float down = std::ldexp(1.0f, -e);
    auto* h = reinterpret_cast<float16_t*>(out);
    for (c = 0; c + 8 <= n; c += 8) {
        const float16x4_t lo = vcvt_f16_f32(vmulq_n_f32(vld1q_f32(x + c), down));
        const float16x4_t hi = vcvt_f16_f32(vmulq_n_f32(vld1q_f32(x + c + 4), down));
        vst1q_f16(h + c, vcombine_f16(lo, hi));
    }
    for (; c < n; ++c)
        h[c] = static_cast<float16_t>(x[c] * down);
    return std::ldexp(1.0f, e);
}

// The products' float sum, as cpu_simd.hpp's half_acts entries describe it.
float dot_h(const float16_t* w, const float16_t* x, int64_t k) {
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                          vdupq_n_f32(0.0f)};
    int64_t c = 0;
    for (; c + 16 <= k; c += 16) {
        const float16x8_t w0 = vld1q_f16(w + c), x0 = vld1q_f16(x + c);
        const float16x8_t w1 = vld1q_f16(w + c + 8), x1 = vld1q_f16(x + c + 8);
        acc[0] = vfmlalq_low_f16(acc[0], w0, x0);
        acc[1] = vfmlalq_high_f16(acc[1], w0, x0);
        acc[2] = vfmlalq_low_f16(acc[2], w1, x1);
        acc[3] = vfmlalq_high_f16(acc[3], w1, x1);
    }
    for (; c + 8 <= k; c += 8) {
        const float16x8_t w0 = vld1q_f16(w + c), x0 = vld1q_f16(x + c);
        acc[0] = vfmlalq_low_f16(acc[0], w0, x0);
        acc[1] = vfmlalq_high_f16(acc[1], w0, x0);
    }
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    // Two halves' product is exact in float, so one fmaf is what fmlal does to a lane.
    for (; c < k; ++c)
        s = std::fma(static_cast<float>(w[c]), static_cast<float>(x[c]), s);
    return s;
}

const float16_t* weight_row(const weights& w, int64_t r) {
    return halves(base::row<uint16_t>(w, r));
}

const float16_t* token_row(half_acts x, int64_t t) {
    return halves(x.data + t * x.stride);
}

void mul_rows_h(const weights& w, const int32_t* rows, int64_t n, const uint16_t* x, float scale,
                float* y) {
    for (int64_t k = 0; k < n; ++k)
        y[rows[k]] = dot_h(weight_row(w, rows[k]), halves(x), w.cols) * scale;
}

void mul_mat_h(const weights& w, int64_t r0, int64_t r1, half_acts x, int64_t n_tok,
               f32_rows_out y) {
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t t = 0; t < n_tok; ++t)
            base::row(y, t)[r] = dot_h(weight_row(w, r), token_row(x, t), w.cols) * x.scale[t];
}

void mul_rows_batch_h(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                      const int32_t* tokens, half_acts x, f32_rows_out y) {
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t e = offsets[i]; e < offsets[i + 1]; ++e) {
            const int32_t t = tokens[e];
            base::row(y, t)[i] = dot_h(weight_row(w, i), token_row(x, t), w.cols) * x.scale[t];
        }
}

constexpr simd_kernels make_table() {
    simd_kernels t = base::table();
    t.prepare_h = prepare_h;
    t.mul_rows_h = mul_rows_h;
    t.mul_mat_h = mul_mat_h;
    t.mul_rows_batch_h = mul_rows_batch_h;
    return t;
}

constexpr simd_kernels table = make_table();

} // namespace

const simd_kernels& neon_fp16_kernels() noexcept {
    return table;
}

} // namespace pi::cpu
