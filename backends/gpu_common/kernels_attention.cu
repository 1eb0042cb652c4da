// Causal multi-head attention (with grouped KV heads) over the rows of a KV cache.
#include "gpu_dispatch.hpp"
#include "gpu_kernels.hpp"

namespace pi::gpu {

namespace {

constexpr int att_groups = 4; // groups of 32 lanes per (token, head)
constexpr int att_threads = att_groups * group;
constexpr int per_lane = 8; // head elements one lane holds
constexpr int max_head_dim = per_lane * group;

// One block per (head, token). Group g walks cache rows g, g + 4, ... with a running softmax
// (lane l holds head elements l, l + 32, ...); the four partial results are merged in group
// order at the end.
template <class K, class V>
__global__ void attention_kernel(view q, view k, view v, const int32_t* q_pos,
                                 const int32_t* kv_pos, pib_attention_params p, view out) {
    __shared__ softmax_state states[att_groups];
    __shared__ float sums[att_groups][max_head_dim];
    const int lane = threadIdx.x % group;
    const int g = threadIdx.x / group;
    const int64_t h = blockIdx.x;
    const int64_t kv_col = h / (p.n_head / p.n_head_kv) * p.head_dim;
    for (int64_t t = blockIdx.y; t < q.ne1; t += gridDim.y) {
        const float* qh = q.row<const float>(t) + h * p.head_dim;
        float qv[per_lane], acc[per_lane];
        for (int i = 0; i < per_lane; ++i) {
            const int d = lane + group * i;
            qv[i] = d < p.head_dim ? qh[d] : 0.0f;
            acc[i] = 0.0f;
        }
        softmax_state st = softmax_empty();
        for (int32_t j = g; j < p.n_kv; j += att_groups) {
            if (kv_pos[j] < 0 || kv_pos[j] > q_pos[t]) continue;
            const unsigned char* kr = k.row_bytes(j);
            float part = 0.0f;
            for (int i = 0; i < per_lane; ++i) {
                const int d = lane + group * i;
                if (d < p.head_dim) part = fmaf(qv[i], K::load(kr, kv_col + d), part);
            }
            float scale_old, weight;
            st = softmax_push(st, group_sum(part) * p.scale, &scale_old, &weight);
            const unsigned char* vr = v.row_bytes(j);
            for (int i = 0; i < per_lane; ++i) {
                const int d = lane + group * i;
                const float vd = d < p.head_dim ? V::load(vr, kv_col + d) : 0.0f;
                acc[i] = fmaf(weight, vd, acc[i] * scale_old);
            }
        }
        __syncthreads(); // the previous token's merge has read the shared arrays
        if (lane == 0) states[g] = st;
        for (int i = 0; i < per_lane; ++i)
            if (lane + group * i < p.head_dim) sums[g][lane + group * i] = acc[i];
        __syncthreads();
        if (g == 0) {
            float scale[att_groups];
            softmax_state total = states[0];
            scale[0] = 1.0f;
            for (int o = 1; o < att_groups; ++o) {
                float sa, sb;
                total = softmax_merge(total, states[o], &sa, &sb);
                for (int e = 0; e < o; ++e)
                    scale[e] *= sa;
                scale[o] = sb;
            }
            float* oh = out.row<float>(t) + h * p.head_dim;
            for (int i = 0; i < per_lane; ++i) {
                const int d = lane + group * i;
                if (d >= p.head_dim) continue;
                float s = 0.0f;
                for (int o = 0; o < att_groups; ++o)
                    s = fmaf(sums[o][d], scale[o], s);
                oh[d] = total.l > 0.0f ? s / total.l : 0.0f;
            }
        }
    }
}

bool params_valid(const pib_attention_params* p) {
    return p != nullptr && p->n_head > 0 && p->n_head_kv > 0 && p->n_head % p->n_head_kv == 0 &&
           p->head_dim > 0 && p->n_kv >= 0;
}

bool cache_shaped(const view& cache, const pib_attention_params& p) {
    return cache.ne0 == static_cast<int64_t>(p.n_head_kv) * p.head_dim && cache.ne1 >= p.n_kv;
}

} // namespace

int attention(context& c, const pib_tensor* q, const pib_tensor* k_cache, const pib_tensor* v_cache,
              const pib_tensor* q_pos, const pib_tensor* kv_pos, const pib_attention_params* p,
              const pib_tensor* out) {
    view vq, vk, vv, vqp, vkp, vo;
    if (const int s = make_views({view_arg{q, &vq},
                                  {k_cache, &vk},
                                  {v_cache, &vv},
                                  {q_pos, &vqp},
                                  {kv_pos, &vkp},
                                  {out, &vo}});
        s != PIB_OK)
        return s;
    if (!params_valid(p)) return PIB_ERR_INVALID_ARGUMENT;
    if (!vq.is(type_f32) || !vo.is(type_f32) || !vq.same_shape(vo) ||
        vq.ne0 != static_cast<int64_t>(p->n_head) * p->head_dim || !cache_shaped(vk, *p) ||
        !cache_shaped(vv, *p) || !is_i32_vector(vqp, vq.ne1) || !vkp.is(type_i32) || vkp.ne1 != 1 ||
        vkp.ne0 < p->n_kv)
        return PIB_ERR_INVALID_ARGUMENT;
    if (p->head_dim > max_head_dim) return PIB_ERR_UNSUPPORTED;
    return with_elements(vk.type, [&]<class K>(K) {
        return with_elements(vv.type, [&]<class V>(V) {
            if (vq.ne1 == 0) return static_cast<int>(PIB_OK);
            const dim3 grid(static_cast<unsigned>(p->n_head),
                            static_cast<unsigned>(vq.ne1 < max_grid_yz ? vq.ne1 : max_grid_yz));
            launch(c, attention_kernel<K, V>, grid, att_threads, vq, vk, vv,
                   vqp.row<const int32_t>(0), vkp.row<const int32_t>(0), *p, vo);
            return launch_status();
        });
    });
}

} // namespace pi::gpu
