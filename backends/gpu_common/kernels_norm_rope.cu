// RMSNorm, LayerNorm and rotary position embedding.
#include "gpu_kernels.hpp"

#include <cmath>

namespace pi::gpu {

namespace {

constexpr int norm_threads = 256;
constexpr int rope_threads = 256;

// One block per row; y may be x because every thread reads its elements again only after
// the block-wide sum is complete, and writes exactly the elements it reads.
__global__ void rms_norm_kernel(view x, const float* w, float eps, view y) {
    __shared__ float partial[norm_threads / group];
    for (int64_t r = blockIdx.x; r < x.ne1; r += gridDim.x) {
        const float* in = x.row<const float>(r);
        float sum = 0.0f;
        for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x)
            sum = fmaf(in[i], in[i], sum);
        sum = block_sum(sum, partial);
        const float scale = 1.0f / sqrtf(sum / static_cast<float>(x.ne0) + eps);
        float* out = y.row<float>(r);
        for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x)
            out[i] = in[i] * scale * w[i];
    }
}

// As rms_norm_kernel, with the mean taken out first (two block-wide sums).
__global__ void layer_norm_kernel(view x, const float* w, const float* b, float eps, view y) {
    __shared__ float partial[norm_threads / group];
    for (int64_t r = blockIdx.x; r < x.ne1; r += gridDim.x) {
        const float* in = x.row<const float>(r);
        float sum = 0.0f;
        for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x)
            sum += in[i];
        const float mean = block_sum(sum, partial) / static_cast<float>(x.ne0);
        float squares = 0.0f;
        for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x)
            squares = fmaf(in[i] - mean, in[i] - mean, squares);
        squares = block_sum(squares, partial);
        const float scale = 1.0f / sqrtf(squares / static_cast<float>(x.ne0) + eps);
        float* out = y.row<float>(r);
        for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x)
            out[i] = (in[i] - mean) * scale * w[i] + (b != nullptr ? b[i] : 0.0f);
    }
}

// One thread per (token, head, pair).
__global__ void rope_kernel(view x, const int32_t* pos, pib_rope_params p, int32_t stride,
                            int32_t partner) {
    const int64_t half = p.n_rot / 2;
    const int64_t n = x.ne1 * p.n_head * half;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t j = e % half;
        const int64_t h = (e / half) % p.n_head;
        const int64_t t = e / (half * p.n_head);
        const double theta =
            rope_theta(pos[t], static_cast<int32_t>(j), p.n_rot, p.freq_base, p.freq_scale);
        const double cs = cos(theta);
        const double sn = sin(theta);
        float* head = x.row<float>(t) + h * p.head_dim;
        const double x0 = head[j * stride];
        const double x1 = head[j * stride + partner];
        head[j * stride] = static_cast<float>(x0 * cs - x1 * sn);
        head[j * stride + partner] = static_cast<float>(x0 * sn + x1 * cs);
    }
}

} // namespace

int rms_norm(context& c, const pib_tensor* x, const pib_tensor* w, float eps, const pib_tensor* y) {
    view vx, vw, vy;
    if (const int s = make_views({view_arg{x, &vx}, {w, &vw}, {y, &vy}}); s != PIB_OK) return s;
    if (!vx.is(type_f32) || !vw.is(type_f32) || !vy.is(type_f32) || !vx.same_shape(vy) ||
        vw.ne0 != vx.ne0 || vw.ne1 != 1 || vx.ne0 == 0 || !(eps >= 0.0f) || !std::isfinite(eps))
        return PIB_ERR_INVALID_ARGUMENT;
    if (vx.ne1 == 0) return PIB_OK;
    launch(c, rms_norm_kernel, blocks_for(vx.ne1, 1), norm_threads, vx, vw.row<const float>(0), eps,
           vy);
    return launch_status();
}

int layer_norm(context& c, const pib_tensor* x, const pib_tensor* w, const pib_tensor* b, float eps,
               const pib_tensor* y) {
    view vx, vw, vy, vb;
    if (const int s = make_views({view_arg{x, &vx}, {w, &vw}, {y, &vy}}); s != PIB_OK) return s;
    if (b != nullptr) {
        if (const int s = make_views({view_arg{b, &vb}}); s != PIB_OK) return s;
        if (!vb.is(type_f32) || vb.ne0 != vx.ne0 || vb.ne1 != 1) return PIB_ERR_INVALID_ARGUMENT;
    }
    if (!vx.is(type_f32) || !vw.is(type_f32) || !vy.is(type_f32) || !vx.same_shape(vy) ||
        vw.ne0 != vx.ne0 || vw.ne1 != 1 || vx.ne0 == 0 || !(eps >= 0.0f) || !std::isfinite(eps))
        return PIB_ERR_INVALID_ARGUMENT;
    if (vx.ne1 == 0) return PIB_OK;
    launch(c, layer_norm_kernel, blocks_for(vx.ne1, 1), norm_threads, vx, vw.row<const float>(0),
           b != nullptr ? vb.row<const float>(0) : nullptr, eps, vy);
    return launch_status();
}

int rope(context& c, const pib_tensor* x, const pib_tensor* pos, const pib_rope_params* p) {
    view vx, vp;
    if (const int s = make_views({view_arg{x, &vx}, {pos, &vp}}); s != PIB_OK) return s;
    if (p == nullptr || p->n_head <= 0 || p->head_dim <= 0 || p->n_rot < 0 ||
        p->n_rot > p->head_dim || p->n_rot % 2 != 0 ||
        (p->mode != PIB_ROPE_NORMAL && p->mode != PIB_ROPE_NEOX) || !(p->freq_base > 0.0f) ||
        !std::isfinite(p->freq_base) || !std::isfinite(p->freq_scale))
        return PIB_ERR_INVALID_ARGUMENT;
    if (!vx.is(type_f32) || vx.ne0 != static_cast<int64_t>(p->n_head) * p->head_dim ||
        !is_i32_vector(vp, vx.ne1))
        return PIB_ERR_INVALID_ARGUMENT;
    const int64_t n = vx.ne1 * p->n_head * (p->n_rot / 2);
    if (n == 0) return PIB_OK;
    // NORMAL pairs (2j, 2j+1); NEOX pairs (j, j + n_rot/2).
    const int32_t stride = p->mode == PIB_ROPE_NEOX ? 1 : 2;
    const int32_t partner = p->mode == PIB_ROPE_NEOX ? p->n_rot / 2 : 1;
    launch(c, rope_kernel, blocks_for(n, rope_threads), rope_threads, vx, vp.row<const int32_t>(0),
           *p, stride, partner);
    return launch_status();
}

} // namespace pi::gpu
