#pragma once
// The loops behind the NEON tables (simd_neon.cpp, simd_neon_dotprod.cpp), written once over a
// policy D that gives the int8 dot product of the level: D::dot(acc, a, b) adds to each int32
// lane of acc the four products of its bytes. Every instantiation takes a type from its file's
// anonymous namespace, so it has internal linkage, as the x86 loops of simd_impl.hpp do.
//
// The NEON tables fill the float products and accumulates (F32, F16 weights, widened to F32 by
// the base AArch64 conversion), the quantized products and accumulates of Q4_0 and Q8_0, select,
// rms_norm, add and relu. Their other entries stay null and weight_types leaves the other types
// out: those run on the reference kernels (see fast_kernels.hpp).
//
// Every output is one fixed sequence of float operations that depends only on its own row and
// token: a dot product of F32/F16 rows is four four-lane FMA chains over 16-column steps, one
// more over the remaining four-column steps into the first, the lanes summed in a fixed order,
// and the last columns FMA'd one by one; a quantized dot product adds, block by block in order,
// the block's exact int32 sum scaled by d_w * d_x with one FMA, for the dense and the sparse
// products alike. Thread count, batch size and dense or sparse product thus never change a bit,
// and because the block sums are exact, the levels with and without SDOT agree bit for bit.
#include "cpu_simd.hpp"
#include "quant/blocks.hpp"

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

namespace pi::cpu::simd {

template <class D> struct neon_impl {
    static float half(uint16_t h) {
        __fp16 f;
        __builtin_memcpy(&f, &h, sizeof(f));
        return static_cast<float>(f);
    }

    static float32x4_t load4(const float* p) { return vld1q_f32(p); }
    static float32x4_t load4(const uint16_t* p) {
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
    }
    static float elem(const float* p, int64_t c) { return p[c]; }
    static float elem(const uint16_t* p, int64_t c) { return half(p[c]); }

    template <class W> static const W* row(const weights& w, int64_t r) {
        return reinterpret_cast<const W*>(w.data + static_cast<std::size_t>(r) * w.stride);
    }
    static const float* row(f32_rows m, int64_t t) {
        return reinterpret_cast<const float*>(reinterpret_cast<const std::byte*>(m.data) +
                                              static_cast<std::size_t>(t) * m.stride);
    }
    static float* row(f32_rows_out m, int64_t t) {
        return reinterpret_cast<float*>(reinterpret_cast<std::byte*>(m.data) +
                                        static_cast<std::size_t>(t) * m.stride);
    }

    // ---- F32 and F16 weights ----

    template <class W> static float dot(const W* w, const float* x, int64_t k) {
        float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                              vdupq_n_f32(0.0f)};
        int64_t c = 0;
        for (; c + 16 <= k; c += 16) {
#pragma GCC unroll 4
            for (int u = 0; u < 4; ++u)
                acc[u] = vfmaq_f32(acc[u], load4(w + c + 4 * u), vld1q_f32(x + c + 4 * u));
        }
        for (; c + 4 <= k; c += 4)
            acc[0] = vfmaq_f32(acc[0], load4(w + c), vld1q_f32(x + c));
        float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
        for (; c < k; ++c)
            s = __builtin_fmaf(elem(w, c), x[c], s);
        return s;
    }

    template <class F> static void visit_float(wtype t, F&& f) {
        if (t == wtype::f16) return f(static_cast<const uint16_t*>(nullptr));
        return f(static_cast<const float*>(nullptr));
    }
    template <class W> static W pointee(const W*); // the W of a visit, in decltype only

    static void mul_mat(const weights& w, int64_t r0, int64_t r1, f32_rows x, int64_t n_tok,
                        f32_rows_out y) {
        visit_float(w.type, [&](auto tag) {
            using W = decltype(pointee(tag));
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t t = 0; t < n_tok; ++t)
                    row(y, t)[r] = dot(row<W>(w, r), row(x, t), w.cols);
        });
    }

    static void mul_rows(const weights& w, const int32_t* rows, int64_t n, const float* x,
                         float* y) {
        visit_float(w.type, [&](auto tag) {
            using W = decltype(pointee(tag));
            for (int64_t k = 0; k < n; ++k)
                y[rows[k]] = dot(row<W>(w, rows[k]), x, w.cols);
        });
    }

    static void mul_rows_batch(const weights& w, int64_t i0, int64_t i1, const int32_t* offsets,
                               const int32_t* tokens, f32_rows x, f32_rows_out y) {
        visit_float(w.type, [&](auto tag) {
            using W = decltype(pointee(tag));
            for (int64_t i = i0; i < i1; ++i)
                for (int64_t e = offsets[i]; e < offsets[i + 1]; ++e)
                    row(y, tokens[e])[i] = dot(row<W>(w, i), row(x, tokens[e]), w.cols);
        });
    }

    // y[c0 .. c1) += v * w[c0 .. c1), one FMA per element.
    template <class W> static void axpy(const W* w, float v, float* y, int64_t c0, int64_t c1) {
        const float32x4_t a = vdupq_n_f32(v);
        int64_t c = c0;
        for (; c + 4 <= c1; c += 4)
            vst1q_f32(y + c, vfmaq_f32(vld1q_f32(y + c), a, load4(w + c)));
        for (; c < c1; ++c)
            y[c] = __builtin_fmaf(v, elem(w, c), y[c]);
    }

    // y[c0 .. c1) += (v * d) * (q - o) per block of 32, c0 and c1 multiples of 32: the scale
    // rounded once per block, then one FMA per element, as the x86 kernels.
    template <class B>
    static void axpy_block(const B* w, float v, float* y, int64_t c0, int64_t c1) {
        for (int64_t b = c0 / qk8_0; b < c1 / qk8_0; ++b) {
            const float32x4_t cf = vdupq_n_f32(v * half(w[b].d));
            int8x16_t q[2];
            codes(w[b], q);
            float* yb = y + b * qk8_0;
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const int16x8_t lo = vmovl_s8(vget_low_s8(q[h]));
                const int16x8_t hi = vmovl_s8(vget_high_s8(q[h]));
                const int16x4_t parts[4] = {vget_low_s16(lo), vget_high_s16(lo), vget_low_s16(hi),
                                            vget_high_s16(hi)};
#pragma GCC unroll 4
                for (int u = 0; u < 4; ++u) {
                    float* p = yb + 16 * h + 4 * u;
                    vst1q_f32(p, vfmaq_f32(vld1q_f32(p), cf, vcvtq_f32_s32(vmovl_s16(parts[u]))));
                }
            }
        }
    }

    template <class W> static void axpy_any(const W* w, float v, float* y, int64_t c0, int64_t c1) {
        if constexpr (sizeof(W) > sizeof(float))
            axpy_block(w, v, y, c0, c1);
        else
            axpy(w, v, y, c0, c1);
    }

    // f(static_cast<const W*>(nullptr)) for every weight type the accumulates take.
    template <class F> static void visit_any(wtype t, F&& f) {
        if (t == wtype::q4_0) return f(static_cast<const block_q4_0*>(nullptr));
        if (t == wtype::q8_0) return f(static_cast<const block_q8_0*>(nullptr));
        return visit_float(t, f);
    }

    static void axpy_rows(const weights& wt, const int32_t* rows, int64_t n, const float* a,
                          float* y, int64_t c0, int64_t c1) {
        visit_any(wt.type, [&](auto tag) {
            using W = decltype(pointee(tag));
            for (int64_t k = 0; k < n; ++k) {
                const float v = a[rows[k]];
                if (v != 0.0f) axpy_any(row<W>(wt, rows[k]), v, y, c0, c1);
            }
        });
    }

    // Row by row in ascending order, each entry's token in turn: every element gets the FMAs of
    // axpy_rows for that token's ascending list, so the bits agree. The scratch is not needed.
    static void axpy_rows_batch(const weights& wt, int64_t n_rows, const int32_t* offsets,
                                const int32_t* tokens, const float* coefs, int64_t, f32_rows_out y,
                                int64_t c0, int64_t c1, float*) {
        visit_any(wt.type, [&](auto tag) {
            using W = decltype(pointee(tag));
            for (int64_t i = 0; i < n_rows; ++i)
                for (int64_t e = offsets[i]; e < offsets[i + 1]; ++e)
                    if (coefs[e] != 0.0f)
                        axpy_any(row<W>(wt, i), coefs[e], row(y, tokens[e]), c0, c1);
        });
    }

    // ---- quantized weights: Q4_0 and Q8_0 ----

    // The 32 signed codes of a block in element order.
    static void codes(const block_q8_0& b, int8x16_t (&q)[2]) {
        q[0] = vld1q_s8(b.qs);
        q[1] = vld1q_s8(b.qs + 16);
    }
    static void codes(const block_q4_0& b, int8x16_t (&q)[2]) {
        const uint8x16_t packed = vld1q_u8(b.qs);
        const int8x16_t eight = vdupq_n_s8(8);
        q[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f))), eight);
        q[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight);
    }

    // A token's prepared row holds, of quant_acts' five arrays, the codes (32 bytes per block)
    // and, in the last array, each block's d_x: the only parts these products read.
    static const int8_t* codes_of(const std::byte* xr, int64_t b) {
        return reinterpret_cast<const int8_t*>(xr + 32 * b);
    }
    static float d_of(const std::byte* xr, int64_t stride, int64_t b) {
        float d;
        __builtin_memcpy(&d, xr + 128 * stride + 8 * b, sizeof(d));
        return d;
    }
    static const std::byte* token_row(quant_acts x, int64_t t) {
        return x.data + t * quant_block_bytes * x.stride;
    }

    // As ggml's Q8_0 quantizer and the x86 kernels: d = max |x| / 127, codes x / d rounded to
    // nearest even.
    static void prepare_q(wtype, const float* x, int64_t blocks, int64_t stride, std::byte* out) {
        for (int64_t b = 0; b < blocks; ++b) {
            float32x4_t v[8];
            float32x4_t amax = vdupq_n_f32(0.0f);
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                v[k] = vld1q_f32(x + 32 * b + 4 * k);
                amax = vmaxq_f32(amax, vabsq_f32(v[k]));
            }
            const float d = vmaxvq_f32(amax) / 127.0f;
            const float32x4_t id = vdupq_n_f32(d != 0.0f ? 1.0f / d : 0.0f);
            int16x8_t n[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k)
                n[k] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(v[2 * k], id))),
                                    vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(v[2 * k + 1], id))));
            auto* qs = reinterpret_cast<int8_t*>(out + 32 * b);
            vst1q_s8(qs, vcombine_s8(vqmovn_s16(n[0]), vqmovn_s16(n[1])));
            vst1q_s8(qs + 16, vcombine_s8(vqmovn_s16(n[2]), vqmovn_s16(n[3])));
            __builtin_memcpy(out + 128 * stride + 8 * b, &d, sizeof(d));
        }
    }

    template <class B>
    static float dot_q(const B* w, const std::byte* xr, int64_t stride, int64_t blocks) {
        float acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            int8x16_t q[2];
            codes(w[b], q);
            const int8_t* xc = codes_of(xr, b);
            int32x4_t s = D::dot(vdupq_n_s32(0), q[0], vld1q_s8(xc));
            s = D::dot(s, q[1], vld1q_s8(xc + 16));
            const float scale = half(w[b].d) * d_of(xr, stride, b);
            acc = __builtin_fmaf(scale, static_cast<float>(vaddvq_s32(s)), acc);
        }
        return acc;
    }

    template <class F> static void visit_q(wtype t, F&& f) {
        if (t == wtype::q4_0) return f(static_cast<const block_q4_0*>(nullptr));
        return f(static_cast<const block_q8_0*>(nullptr));
    }

    static void mul_rows_q(const weights& w, const int32_t* rows, int64_t n, quant_acts x,
                           float* y) {
        visit_q(w.type, [&](auto tag) {
            using B = decltype(pointee(tag));
            for (int64_t k = 0; k < n; ++k)
                y[rows[k]] = dot_q(row<B>(w, rows[k]), x.data, x.stride, w.cols / qk8_0);
        });
    }

    static void mul_mat_q(const weights& w, int64_t r0, int64_t r1, quant_acts x, int64_t n_tok,
                          f32_rows_out y) {
        visit_q(w.type, [&](auto tag) {
            using B = decltype(pointee(tag));
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t t = 0; t < n_tok; ++t)
                    row(y, t)[r] = dot_q(row<B>(w, r), token_row(x, t), x.stride, w.cols / qk8_0);
        });
    }

    static void mul_rows_batch_q(const weights* w, int n_mat, int64_t i0, int64_t i1,
                                 const int32_t* offsets, const int32_t* tokens, quant_acts x,
                                 const f32_rows_out* y) {
        visit_q(w[0].type, [&](auto tag) {
            using B = decltype(pointee(tag));
            for (int m = 0; m < n_mat; ++m)
                for (int64_t i = i0; i < i1; ++i)
                    for (int64_t e = offsets[i]; e < offsets[i + 1]; ++e)
                        row(y[m], tokens[e])[i] = dot_q(row<B>(w[m], i), token_row(x, tokens[e]),
                                                        x.stride, w[m].cols / qk8_0);
        });
    }

    // ---- the layer's element-wise steps ----

    static int64_t select(const float* p, int64_t n, float threshold, int32_t* out) {
        const float32x4_t tv = vdupq_n_f32(threshold);
        const uint32x4_t lane_bit = {1, 2, 4, 8};
        int64_t k = 0, c = 0;
        for (; c + 4 <= n; c += 4) {
            uint32_t bits = vaddvq_u32(vandq_u32(vcgeq_f32(vld1q_f32(p + c), tv), lane_bit));
            if (out == nullptr) {
                k += __builtin_popcount(bits);
                continue;
            }
            for (; bits != 0; bits &= bits - 1u)
                out[k++] = static_cast<int32_t>(c + __builtin_ctz(bits));
        }
        for (; c < n; ++c) {
            if (!(p[c] >= threshold)) continue;
            if (out != nullptr) out[k] = static_cast<int32_t>(c);
            ++k;
        }
        return k;
    }

    static void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
        float32x4_t acc = vdupq_n_f32(0.0f);
        int64_t c = 0;
        for (; c + 4 <= n; c += 4) {
            const float32x4_t v = vld1q_f32(x + c);
            acc = vfmaq_f32(acc, v, v);
        }
        float s = vaddvq_f32(acc);
        for (; c < n; ++c)
            s = __builtin_fmaf(x[c], x[c], s);
        const float scale = 1.0f / __builtin_sqrtf(s / static_cast<float>(n) + eps);
        for (c = 0; c + 4 <= n; c += 4)
            vst1q_f32(y + c, vmulq_f32(vmulq_n_f32(vld1q_f32(x + c), scale), vld1q_f32(w + c)));
        for (; c < n; ++c)
            y[c] = x[c] * scale * w[c];
    }

    static void add(const float* a, const float* b, float* out, int64_t n) {
        int64_t c = 0;
        for (; c + 4 <= n; c += 4)
            vst1q_f32(out + c, vaddq_f32(vld1q_f32(a + c), vld1q_f32(b + c)));
        for (; c < n; ++c)
            out[c] = a[c] + b[c];
    }

    // A select on x > 0, not vmaxq_f32: FMAX passes a NaN through, where the reference (and the
    // x86 levels) give 0.
    static void relu(const float* x, float* out, int64_t n) {
        const float32x4_t zero = vdupq_n_f32(0.0f);
        int64_t c = 0;
        for (; c + 4 <= n; c += 4) {
            const float32x4_t v = vld1q_f32(x + c);
            vst1q_f32(out + c, vbslq_f32(vcgtq_f32(v, zero), v, zero));
        }
        for (; c < n; ++c)
            out[c] = x[c] > 0.0f ? x[c] : 0.0f;
    }

    static constexpr uint32_t bit(wtype t) {
        return 1u << static_cast<uint32_t>(t);
    }

    static constexpr simd_kernels table() {
        return simd_kernels{
            .mul_mat = mul_mat,
            .mul_rows = mul_rows,
            .mul_rows_batch = mul_rows_batch,
            .axpy_rows = axpy_rows,
            .axpy_rows_batch = axpy_rows_batch,
            .attend = nullptr,
            .select = select,
            .rms_norm = rms_norm,
            .add = add,
            .relu = relu,
            .glu = nullptr,
            .prepare_q = prepare_q,
            .mul_rows_q = mul_rows_q,
            .mul_mat_q = mul_mat_q,
            .mul_rows_batch_q = mul_rows_batch_q,
            .prepare_k = nullptr,
            .mul_rows_k = nullptr,
            .mul_mat_k = nullptr,
            .mul_rows_batch_k = nullptr,
            .axpy_rows_k = nullptr,
            .prepare_h = nullptr,
            .mul_rows_h = nullptr,
            .mul_mat_h = nullptr,
            .mul_rows_batch_h = nullptr,
            .weight_types = bit(wtype::f32) | bit(wtype::f16) | bit(wtype::q4_0) | bit(wtype::q8_0),
        };
    }
};

} // namespace pi::cpu::simd
