#pragma once
// The fast kernels: threads, chunking and scratch around the instruction-set loops of
// cpu_simd.hpp. The reference entry points (cpu_kernels.hpp) validate the arguments and then
// call these when the context has a simd table, so they receive checked views only.
#include "cpu_context.hpp"
#include "cpu_tensor.hpp"

#include <span>

namespace pi::cpu {

// fast_matmul.cpp; weights are F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K or Q6_K (see
// fast_weight_type), lists hold counts within capacity and valid indices.
// Whether the fast products and accumulates of k take weights of this (accepted) type; the others
// (Q2_K, Q3_K, Q5_K at every level, and those a table's weight_types leaves out) run on the
// reference kernels.
bool fast_weight_type(const simd_kernels& k, uint32_t type);
int fast_mul_mat(context& c, const view& w, const view& x, const view& y);
// fast_mul_mat_sparse: one or two matrices w[m] of one type and shape sharing x and the lists,
// into y[m].
int fast_mul_mat_sparse(context& c, std::span<const view> w, const view& x, const view& idx,
                        const view& count, std::span<const view> y);
int fast_axpy_sparse(context& c, const view& wt, const view& a, const view& idx, const view& count,
                     const view& y);
int fast_select_active(context& c, const view& p, float threshold, const view& idx,
                       const view& count);

// fast_quant.cpp: x's rows prepared for products with weights of the quantized `type`, in the
// context's grow-only scratch.
quant_acts prepare_activations(context& c, wtype type, const view& x);
// x's rows quantized to Q8_K (x.ne0 a positive multiple of qk_k), in the same scratch.
k_acts prepare_k_activations(context& c, const view& x);
// x's rows rounded to binary16 for F16 products when the table has prepare_h, in the same scratch.
half_acts prepare_half_activations(context& c, const view& x);

// fast_layer.cpp
int fast_attention(context& c, const view& q, const view& k, const view& v, const view& q_pos,
                   const view& kv_pos, const pib_attention_params& p, const view& out);
int fast_rms_norm(context& c, const view& x, const view& w, float eps, const view& y);
int fast_add(context& c, const view& a, const view& b, const view& out);
int fast_relu(context& c, const view& x, const view& out);
int fast_glu(context& c, const view& gate, const view& up, int32_t kind, const view& out);

} // namespace pi::cpu
