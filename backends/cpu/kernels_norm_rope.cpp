// RMSNorm, LayerNorm and rotary position embedding.
#include "cpu_kernels.hpp"
#include "cpu_parallel.hpp"
#include "cpu_tensor.hpp"
#include "fast_kernels.hpp"

#include <cmath>

namespace pi::cpu {

int rms_norm(context& c, const pib_tensor* x, const pib_tensor* w, float eps, const pib_tensor* y) {
    view vx, vw, vy;
    if (const int s = make_views({{x, &vx}, {w, &vw}, {y, &vy}}); s != PIB_OK) return s;
    if (!vx.is(ggml_type::f32) || !vw.is(ggml_type::f32) || !vy.is(ggml_type::f32) ||
        !vx.same_shape(vy) || vw.ne0 != vx.ne0 || vw.ne1 != 1 || vx.ne0 == 0 || !(eps >= 0.0f) ||
        !std::isfinite(eps))
        return PIB_ERR_INVALID_ARGUMENT;
    if (c.simd != nullptr && c.simd->rms_norm != nullptr) return fast_rms_norm(c, vx, vw, eps, vy);
    const float* weight = vw.row<const float>(0);
    parallel_1d(c, vx.ne1, grain_for(vx.ne0), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* in = vx.row<const float>(r);
            float* out = vy.row<float>(r); // may be `in`: the sum is complete before writing
            double sum = 0.0;
            for (int64_t i = 0; i < vx.ne0; ++i)
                sum += static_cast<double>(in[i]) * in[i];
            const double scale = 1.0 / std::sqrt(sum / static_cast<double>(vx.ne0) + eps);
            for (int64_t i = 0; i < vx.ne0; ++i)
                out[i] = static_cast<float>(in[i] * scale * weight[i]);
        }
    });
    return PIB_OK;
}

int layer_norm(context& c, const pib_tensor* x, const pib_tensor* w, const pib_tensor* b, float eps,
               const pib_tensor* y) {
    view vx, vw, vy, vb;
    if (const int s = make_views({{x, &vx}, {w, &vw}, {y, &vy}}); s != PIB_OK) return s;
    if (b != nullptr) {
        if (const int s = make_views({{b, &vb}}); s != PIB_OK) return s;
        if (!vb.is(ggml_type::f32) || vb.ne0 != vx.ne0 || vb.ne1 != 1)
            return PIB_ERR_INVALID_ARGUMENT;
    }
    if (!vx.is(ggml_type::f32) || !vw.is(ggml_type::f32) || !vy.is(ggml_type::f32) ||
        !vx.same_shape(vy) || vw.ne0 != vx.ne0 || vw.ne1 != 1 || vx.ne0 == 0 || !(eps >= 0.0f) ||
        !std::isfinite(eps))
        return PIB_ERR_INVALID_ARGUMENT;
    const float* weight = vw.row<const float>(0);
    const float* bias = b != nullptr ? vb.row<const float>(0) : nullptr;
    parallel_1d(c, vx.ne1, grain_for(vx.ne0), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* in = vx.row<const float>(r);
            float* out = vy.row<float>(r); // may be `in`: both moments are complete before writing
            double sum = 0.0;
            for (int64_t i = 0; i < vx.ne0; ++i)
                sum += in[i];
            const double mean = sum / static_cast<double>(vx.ne0);
            double squares = 0.0;
            for (int64_t i = 0; i < vx.ne0; ++i)
                squares += (in[i] - mean) * (in[i] - mean);
            const double scale = 1.0 / std::sqrt(squares / static_cast<double>(vx.ne0) + eps);
            for (int64_t i = 0; i < vx.ne0; ++i)
                out[i] = static_cast<float>((in[i] - mean) * scale * weight[i] +
                                            (bias != nullptr ? bias[i] : 0.0f));
        }
    });
    return PIB_OK;
}

int rope(context& c, const pib_tensor* x, const pib_tensor* pos, const pib_rope_params* p) {
    view vx, vp;
    if (const int s = make_views({{x, &vx}, {pos, &vp}}); s != PIB_OK) return s;
    if (p == nullptr || p->n_head <= 0 || p->head_dim <= 0 || p->n_rot < 0 ||
        p->n_rot > p->head_dim || p->n_rot % 2 != 0 ||
        (p->mode != PIB_ROPE_NORMAL && p->mode != PIB_ROPE_NEOX) || !(p->freq_base > 0.0f) ||
        !std::isfinite(p->freq_base) || !std::isfinite(p->freq_scale))
        return PIB_ERR_INVALID_ARGUMENT;
    if (!vx.is(ggml_type::f32) || vx.ne0 != static_cast<int64_t>(p->n_head) * p->head_dim ||
        !is_i32_vector(vp, vx.ne1))
        return PIB_ERR_INVALID_ARGUMENT;

    const int32_t half = p->n_rot / 2;
    // NORMAL pairs (2j, 2j+1); NEOX pairs (j, j + n_rot/2).
    const int32_t stride = p->mode == PIB_ROPE_NEOX ? 1 : 2;
    const int32_t partner = p->mode == PIB_ROPE_NEOX ? half : 1;
    const int32_t* positions = vp.row<const int32_t>(0);
    // The pair frequencies once per call, each angle's cos/sin once per token for all heads:
    // a decode step rotates a few thousand floats, less work than handing it to another thread.
    double* freq = grown(c.rope_freq, static_cast<size_t>(half));
    for (int32_t j = 0; j < half; ++j)
        freq[j] =
            std::pow(static_cast<double>(p->freq_base), -2.0 * j / static_cast<double>(p->n_rot));
    parallel_1d(c, vx.ne1, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float* row = vx.row<float>(t);
            for (int32_t j = 0; j < half; ++j) {
                const double theta = static_cast<double>(positions[t]) * p->freq_scale * freq[j];
                const double cs = std::cos(theta);
                const double sn = std::sin(theta);
                for (int64_t h = 0; h < p->n_head; ++h) {
                    float* head = row + h * p->head_dim;
                    const double x0 = head[j * stride];
                    const double x1 = head[j * stride + partner];
                    head[j * stride] = static_cast<float>(x0 * cs - x1 * sn);
                    head[j * stride + partner] = static_cast<float>(x0 * sn + x1 * cs);
                }
            }
        }
    });
    return PIB_OK;
}

} // namespace pi::cpu
