// Causal multi-head attention (with grouped KV heads) over the rows of a KV cache.
#include "cpu_kernels.hpp"
#include "cpu_parallel.hpp"
#include "cpu_tensor.hpp"
#include "fast_kernels.hpp"

#include <cmath>
#include <cstddef>
#include <limits>

namespace pi::cpu {

namespace {

bool params_valid(const pib_attention_params* p) {
    return p != nullptr && p->n_head > 0 && p->n_head_kv > 0 && p->n_head % p->n_head_kv == 0 &&
           p->head_dim > 0 && p->n_kv >= 0;
}

bool cache_shaped(const view& cache, const pib_attention_params& p) {
    return cache.ne0 == static_cast<int64_t>(p.n_head_kv) * p.head_dim && cache.ne1 >= p.n_kv;
}

// One (token, query head): scores over the visible cache rows, softmax with the maximum
// subtracted, then the weighted sum of V rows. `scratch` holds n_kv scores + head_dim sums.
template <class K, class V>
void attend_head(const float* q, const view& k, const view& v, int64_t kv_col, int32_t q_pos,
                 const int32_t* kv_pos, const pib_attention_params& p, double* scratch,
                 float* out) {
    double* scores = scratch;
    double* acc = scratch + p.n_kv;
    double max = -std::numeric_limits<double>::infinity();
    bool any = false;
    for (int32_t j = 0; j < p.n_kv; ++j) {
        if (kv_pos[j] < 0 || kv_pos[j] > q_pos) continue;
        scores[j] = dot(k.row<const K>(j) + kv_col, q, p.head_dim) * p.scale;
        if (!any || scores[j] > max) max = scores[j];
        any = true;
    }
    if (!any) {
        for (int32_t d = 0; d < p.head_dim; ++d)
            out[d] = 0.0f;
        return;
    }
    for (int32_t d = 0; d < p.head_dim; ++d)
        acc[d] = 0.0;
    double sum = 0.0;
    for (int32_t j = 0; j < p.n_kv; ++j) {
        if (kv_pos[j] < 0 || kv_pos[j] > q_pos) continue;
        const double e = std::exp(scores[j] - max);
        sum += e;
        const V* vr = v.row<const V>(j) + kv_col;
        for (int32_t d = 0; d < p.head_dim; ++d)
            acc[d] += e * load(vr, d);
    }
    for (int32_t d = 0; d < p.head_dim; ++d)
        out[d] = static_cast<float>(acc[d] / sum);
}

} // namespace

int attention(context& c, const pib_tensor* q, const pib_tensor* k_cache, const pib_tensor* v_cache,
              const pib_tensor* q_pos, const pib_tensor* kv_pos, const pib_attention_params* p,
              const pib_tensor* out) {
    view vq, vk, vv, vqp, vkp, vo;
    if (const int s = make_views(
            {{q, &vq}, {k_cache, &vk}, {v_cache, &vv}, {q_pos, &vqp}, {kv_pos, &vkp}, {out, &vo}});
        s != PIB_OK)
        return s;
    if (!params_valid(p)) return PIB_ERR_INVALID_ARGUMENT;
    if (!vq.is(ggml_type::f32) || !vo.is(ggml_type::f32) || !vq.same_shape(vo) ||
        vq.ne0 != static_cast<int64_t>(p->n_head) * p->head_dim || !cache_shaped(vk, *p) ||
        !cache_shaped(vv, *p) || !is_i32_vector(vqp, vq.ne1) || !vkp.is(ggml_type::i32) ||
        vkp.ne1 != 1 || vkp.ne0 < p->n_kv)
        return PIB_ERR_INVALID_ARGUMENT;

    if (c.simd != nullptr && c.simd->attend != nullptr) {
        const bool float_caches = (vk.is(ggml_type::f32) || vk.is(ggml_type::f16)) &&
                                  (vv.is(ggml_type::f32) || vv.is(ggml_type::f16));
        if (!float_caches) return PIB_ERR_UNSUPPORTED;
        return fast_attention(c, vq, vk, vv, vqp, vkp, *p, vo);
    }
    const int32_t group = p->n_head / p->n_head_kv;
    const std::size_t scratch_len = static_cast<std::size_t>(p->n_kv) + p->head_dim;
    const int32_t* qp = vqp.row<const int32_t>(0);
    const int32_t* kp = vkp.row<const int32_t>(0);
    return with_float_type(vk.type, [&]<class K>(const K*) {
        return with_float_type(vv.type, [&]<class V>(const V*) {
            parallel_2d(c, vq.ne1, p->n_head, 1, [&](int64_t t, int64_t h0, int64_t h1) {
                std::vector<double>& scratch = c.attention_scratch.local();
                if (scratch.size() < scratch_len) scratch.resize(scratch_len);
                for (int64_t h = h0; h < h1; ++h) {
                    const int64_t col = h * p->head_dim;
                    const int64_t kv_col = (h / group) * p->head_dim;
                    attend_head<K, V>(vq.row<const float>(t) + col, vk, vv, kv_col, qp[t], kp, *p,
                                      scratch.data(), vo.row<float>(t) + col);
                }
            });
            return static_cast<int>(PIB_OK);
        });
    });
}

} // namespace pi::cpu
