// Dense and sparse matrix products of the fast kernels, on float and quantized weights. Decode
// (one token) streams the weights once, rows split across threads; prompt batches reuse each
// weight row for a register tile of tokens; the sparse batch kernels regroup the per-token
// active lists per neuron so that every active row is read once for all the tokens that need
// it. Products with quantized weights read activations prepared once per call (fast_quant.cpp).
#include "cpu_parallel.hpp"
#include "fast_kernels.hpp"

#include <algorithm>
#include <cstring>

namespace pi::cpu {

namespace {

// Bytes of weights one decode task streams at least, so that scheduling stays a small cost.
constexpr int64_t decode_task_bytes = 64 << 10;
// Bytes of weight rows a prompt-batch task keeps in the L2 cache while all tokens pass.
constexpr int64_t batch_task_bytes = 256 << 10;

// The wtype of an accepted weight type (see fast_weight_type).
wtype wtype_of(uint32_t type) {
    switch (static_cast<ggml_type>(type)) {
    case ggml_type::f16:
        return wtype::f16;
    case ggml_type::q4_0:
        return wtype::q4_0;
    case ggml_type::q4_1:
        return wtype::q4_1;
    case ggml_type::q5_0:
        return wtype::q5_0;
    case ggml_type::q5_1:
        return wtype::q5_1;
    case ggml_type::q8_0:
        return wtype::q8_0;
    case ggml_type::q4_k:
        return wtype::q4_k;
    case ggml_type::q6_k:
        return wtype::q6_k;
    default:
        return wtype::f32;
    }
}

weights weights_of(const view& w) {
    return weights{w.base, w.nb1, w.ne0, wtype_of(w.type)};
}

bool quantized(const weights& w) {
    return w.type != wtype::f32 && w.type != wtype::f16;
}

bool k_quant(const weights& w) {
    return w.type == wtype::q4_k || w.type == wtype::q6_k;
}

// F16 weights on a level with FP16 arithmetic: the products take half_acts.
bool half_products(const simd_kernels& k, const weights& w) {
    return w.type == wtype::f16 && k.prepare_h != nullptr;
}

f32_rows in_rows(const view& v) {
    return f32_rows{v.row<const float>(0), v.nb1};
}

f32_rows_out out_rows(const view& v) {
    return f32_rows_out{v.row<float>(0), v.nb1};
}

// How many rows of `w` make `bytes`, at least one.
int64_t rows_for(const view& w, int64_t bytes) {
    const auto row = static_cast<int64_t>(row_bytes(static_cast<ggml_type>(w.type), w.ne0));
    return std::max<int64_t>(1, bytes / std::max<int64_t>(1, row));
}

// Column chunks of the accumulates: whole cache lines of y, so that no two tasks write one line,
// and whole blocks of quantized rows (super-blocks of K-quant rows).
constexpr int64_t column_align = 32;
int64_t column_align_of(const weights& w) {
    return k_quant(w) ? qk_k : column_align;
}

// Zeroes every row of y (F32), tokens split across threads.
void zero_rows(context& c, const view& y) {
    const int64_t chunk =
        chunk_size(c, y.ne1, std::max<int64_t>(1, (1 << 16) / (y.ne0 + 1)), y.ne1, 1);
    parallel_chunks(c, y.ne1, chunk, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            std::memset(y.row<float>(t), 0, static_cast<std::size_t>(y.ne0) * sizeof(float));
    });
}

struct neuron_lists {
    const int32_t* offsets; // n_rows + 1 entries
    const int32_t* tokens;
    const float* coefs; // null unless built with activations
};

// The per-token lists regrouped per neuron by a counting sort, tokens ascending within each
// neuron. With `a`, only entries whose activation a[t][i] is nonzero are kept, with it as their
// coefficient. O(entries) on the calling thread: cheap next to the products that follow.
neuron_lists by_neuron(context& c, const view& idx, const view& count, int64_t n_rows,
                       const view* a) {
    const int32_t* n = count.row<const int32_t>(0);
    const int64_t n_tok = count.ne0;
    auto kept = [&](int64_t t, int32_t i) {
        return a == nullptr || a->row<const float>(t)[i] != 0.0f;
    };
    int32_t* offsets = grown(c.neuron_offsets, static_cast<std::size_t>(n_rows) + 1);
    std::fill(offsets, offsets + n_rows + 1, 0);
    for (int64_t t = 0; t < n_tok; ++t) {
        const int32_t* list = idx.row<const int32_t>(t);
        for (int32_t k = 0; k < n[t]; ++k)
            if (kept(t, list[k])) ++offsets[list[k] + 1];
    }
    for (int64_t i = 0; i < n_rows; ++i)
        offsets[i + 1] += offsets[i];
    const auto entries = static_cast<std::size_t>(offsets[n_rows]);
    int32_t* cursor = grown(c.neuron_cursor, static_cast<std::size_t>(n_rows));
    std::copy(offsets, offsets + n_rows, cursor);
    int32_t* tokens = grown(c.neuron_tokens, entries);
    float* coefs = a != nullptr ? grown(c.neuron_coefs, entries) : nullptr;
    for (int64_t t = 0; t < n_tok; ++t) {
        const int32_t* list = idx.row<const int32_t>(t);
        for (int32_t k = 0; k < n[t]; ++k) {
            const int32_t i = list[k];
            if (!kept(t, i)) continue;
            const int32_t e = cursor[i]++;
            tokens[e] = static_cast<int32_t>(t);
            if (coefs != nullptr) coefs[e] = a->row<const float>(t)[i];
        }
    }
    return {offsets, tokens, coefs};
}

// Batches up to this many tokens take the sparse products token by token (measured on the
// 1.1B-shaped bench model, Q4_0, 2 threads: 2 to 16 tokens 10-20 % faster than by neuron, 32 and
// 64 the same).
constexpr int64_t few_tokens = 16;

} // namespace

bool fast_weight_type(const simd_kernels& k, uint32_t type) {
    switch (static_cast<ggml_type>(type)) {
    case ggml_type::q2_k:
    case ggml_type::q3_k:
    case ggml_type::q5_k:
        return false;
    default:
        return (k.weight_types >> static_cast<uint32_t>(wtype_of(type)) & 1u) != 0;
    }
}

int fast_mul_mat(context& c, const view& w, const view& x, const view& y) {
    const simd_kernels& k = *c.simd;
    const weights wr = weights_of(w);
    const int64_t rows = w.ne1;
    const int64_t chunk = x.ne1 == 1 ? chunk_size(c, rows, rows_for(w, decode_task_bytes), rows, 8)
                                     : chunk_size(c, rows, 8, rows_for(w, batch_task_bytes), 8);
    if (half_products(k, wr)) {
        const half_acts xh = prepare_half_activations(c, x);
        parallel_chunks(c, rows, chunk, [&](int64_t r0, int64_t r1) {
            k.mul_mat_h(wr, r0, r1, xh, x.ne1, out_rows(y));
        });
        return PIB_OK;
    }
    if (!quantized(wr)) {
        parallel_chunks(c, rows, chunk, [&](int64_t r0, int64_t r1) {
            k.mul_mat(wr, r0, r1, in_rows(x), x.ne1, out_rows(y));
        });
        return PIB_OK;
    }
    if (w.ne0 == 0) { // no blocks: every product is an empty sum
        zero_rows(c, y);
        return PIB_OK;
    }
    if (k_quant(wr)) {
        const k_acts xk = prepare_k_activations(c, x);
        parallel_chunks(c, rows, chunk, [&](int64_t r0, int64_t r1) {
            k.mul_mat_k(wr, r0, r1, xk, x.ne1, out_rows(y));
        });
        return PIB_OK;
    }
    const quant_acts xq = prepare_activations(c, wr.type, x);
    parallel_chunks(c, rows, chunk, [&](int64_t r0, int64_t r1) {
        k.mul_mat_q(wr, r0, r1, xq, x.ne1, out_rows(y));
    });
    return PIB_OK;
}

int fast_mul_mat_sparse(context& c, std::span<const view> w, const view& x, const view& idx,
                        const view& count, std::span<const view> y) {
    const simd_kernels& k = *c.simd;
    if (w.empty() || w.size() > 2 || y.size() != w.size()) return PIB_ERR_INVALID_ARGUMENT;
    const auto n_mat = static_cast<int>(w.size());
    weights wr[2];
    f32_rows_out out[2];
    for (int m = 0; m < n_mat; ++m) {
        wr[m] = weights_of(w[m]);
        out[m] = out_rows(y[m]);
    }
    const bool kq = k_quant(wr[0]) && w[0].ne0 > 0;
    const bool quant = quantized(wr[0]) && !kq;
    const quant_acts xq = quant ? prepare_activations(c, wr[0].type, x) : quant_acts{};
    const k_acts xk = kq ? prepare_k_activations(c, x) : k_acts{};
    const bool half = half_products(k, wr[0]);
    const half_acts xh = half ? prepare_half_activations(c, x) : half_acts{};
    if (k_quant(wr[0]) && !kq) { // rows without blocks: every product is an empty sum
        for (int m = 0; m < n_mat; ++m)
            zero_rows(c, y[m]);
        return PIB_OK;
    }
    for (int m = 0; m < n_mat; ++m)
        zero_rows(c, y[m]);
    if (x.ne1 <= few_tokens) {
        // Each token's lists through the decode kernel, the tokens one after the other: for a
        // few tokens, gathering the lists by neuron costs more than the rows they share save.
        // Few, long chunks: each chunk starts its scattered rows cold.
        const int32_t* counts = count.row<const int32_t>(0);
        // Where token t's entries begin: the tokens' lists, each matrix's after the other.
        int64_t start[few_tokens + 1] = {};
        for (int64_t t = 0; t < x.ne1; ++t)
            start[t + 1] = start[t] + n_mat * counts[t];
        const int64_t total = start[x.ne1];
        const int64_t chunk = chunk_size(c, total, rows_for(w[0], decode_task_bytes), total, 8, 2);
        parallel_chunks(c, total, chunk, [&](int64_t e0, int64_t e1) {
            for (int64_t t = 0; t < x.ne1; ++t) {
                const int64_t n = counts[t];
                const int32_t* list = idx.row<const int32_t>(t);
                for (int m = 0; m < n_mat; ++m) {
                    const int64_t base = start[t] + m * n;
                    const int64_t k0 = std::max(e0, base) - base;
                    const int64_t k1 = std::min(e1, base + n) - base;
                    if (k0 >= k1) continue;
                    if (kq)
                        k.mul_rows_k(wr[m], list + k0, k1 - k0, xk.data + t * xk.stride,
                                     y[m].row<float>(t));
                    else if (quant)
                        k.mul_rows_q(
                            wr[m], list + k0, k1 - k0,
                            quant_acts{xq.data + t * quant_block_bytes * xq.stride, xq.stride},
                            y[m].row<float>(t));
                    else if (half)
                        k.mul_rows_h(wr[m], list + k0, k1 - k0, xh.data + t * xh.stride,
                                     xh.scale[t], y[m].row<float>(t));
                    else
                        k.mul_rows(wr[m], list + k0, k1 - k0, x.row<const float>(t),
                                   y[m].row<float>(t));
                }
            }
        });
        return PIB_OK;
    }
    const neuron_lists lists = by_neuron(c, idx, count, w[0].ne1, nullptr);
    const int64_t chunk = chunk_size(c, w[0].ne1, 16, w[0].ne1, 16, 8);
    parallel_chunks(c, w[0].ne1, chunk, [&](int64_t i0, int64_t i1) {
        if (kq) {
            k.mul_rows_batch_k(wr, n_mat, i0, i1, lists.offsets, lists.tokens, xk, out);
        } else if (quant) {
            k.mul_rows_batch_q(wr, n_mat, i0, i1, lists.offsets, lists.tokens, xq, out);
        } else if (half) {
            for (int m = 0; m < n_mat; ++m)
                k.mul_rows_batch_h(wr[m], i0, i1, lists.offsets, lists.tokens, xh, out[m]);
        } else {
            for (int m = 0; m < n_mat; ++m)
                k.mul_rows_batch(wr[m], i0, i1, lists.offsets, lists.tokens, in_rows(x), out[m]);
        }
    });
    return PIB_OK;
}

int fast_axpy_sparse(context& c, const view& wt, const view& a, const view& idx, const view& count,
                     const view& y) {
    const simd_kernels& k = *c.simd;
    const weights wr = weights_of(wt);
    const int64_t cols = y.ne0;
    const int32_t* counts = count.row<const int32_t>(0);
    int64_t entries = 0;
    for (int64_t t = 0; t < a.ne1; ++t)
        entries += counts[t];
    // Token by token while few rows are listed per token (decode, sparse prompts): a task keeps
    // blocks of its columns of y in registers while the listed rows pass, and in a prompt finds
    // the rows of earlier tokens in L2. With many rows per token the neuron-major kernel below
    // converts each row block once for all its tokens (measured crossover: about a quarter of
    // the rows). The first applies a token's rows in list order, the second in ascending row
    // order: for ascending lists without repeats, as select_active makes them, they give the same
    // bits, so a token gets the same result alone and in any batch.
    // K-quant rows always go token by token (no neuron-major kernel for them yet).
    if (a.ne1 == 1 || entries * 4 < a.ne1 * wt.ne1 || k_quant(wr)) {
        // In decode a task reads its column block of every listed row: two blocks per thread
        // keep those pieces long (measured: about 1.5x the bandwidth of four).
        const int64_t align = column_align_of(wr);
        const int64_t chunk = chunk_size(c, cols, std::max<int64_t>(64, align), cols, align, 2);
        parallel_chunks(c, cols, chunk, [&](int64_t c0, int64_t c1) {
            for (int64_t t = 0; t < a.ne1; ++t) {
                const int32_t* list = idx.row<const int32_t>(t);
                const float* at = a.row<const float>(t);
                if (k_quant(wr))
                    k.axpy_rows_k(wr, list, counts[t], at, y.row<float>(t), c0, c1);
                else
                    k.axpy_rows(wr, list, counts[t], at, y.row<float>(t), c0, c1);
            }
        });
        return PIB_OK;
    }
    const neuron_lists lists = by_neuron(c, idx, count, wt.ne1, &a);
    const int64_t chunk = chunk_size(c, cols, 64, cols, column_align);
    const int64_t per_chunk = axpy_batch_scratch(a.ne1);
    float* scratch =
        grown(c.axpy_scratch, static_cast<std::size_t>((cols + chunk - 1) / chunk * per_chunk));
    parallel_chunks(c, cols, chunk, [&](int64_t c0, int64_t c1) {
        k.axpy_rows_batch(wr, wt.ne1, lists.offsets, lists.tokens, lists.coefs, a.ne1, out_rows(y),
                          c0, c1, scratch + c0 / chunk * per_chunk);
    });
    return PIB_OK;
}

int fast_select_active(context& c, const view& p, float threshold, const view& idx,
                       const view& count) {
    const simd_kernels& k = *c.simd;
    // Count first so that a list longer than idx's capacity fails before anything is written.
    const int64_t longest = parallel_max(c, p.ne1, 0, [&](int64_t t) {
        return k.select(p.row<const float>(t), p.ne0, threshold, nullptr);
    });
    if (longest > idx.ne0) return PIB_ERR_INVALID_ARGUMENT;
    parallel_1d(c, p.ne1, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            count.row<int32_t>(0)[t] = static_cast<int32_t>(
                k.select(p.row<const float>(t), p.ne0, threshold, idx.row<int32_t>(t)));
    });
    return PIB_OK;
}

} // namespace pi::cpu
