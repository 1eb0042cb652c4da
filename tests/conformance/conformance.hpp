#pragma once
// The conformance suite's bench: every tensor exists twice, once on the backend under test and
// once on the oracle (the CPU backend's scalar reference kernels), built from the same host
// data. Each test runs a vtable op on both and compares what comes back.
//
// Tolerances are stated as a normalized mean squared error, sum (got - want)^2 / sum want^2:
#include "pib_backend.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pi::conformance {

// Data movement and integer results: bit for bit.
inline constexpr double exact = 0.0;
// One rounding of float arithmetic on each side (exp in SiLU, RMSNorm's scale, RoPE's products).
inline constexpr double tol_pointwise = 1e-12;
// Float dot products and softmax sums against the double-accumulating reference.
inline constexpr double tol_reduction = 1e-10;
// Products with Q4_0/Q8_0 weights on a backend that quantizes the activations to Q8_0 blocks
// first, as ggml and the CPU's fast kernels do: rounding each element to 1/254 of its block's
// largest magnitude gives an NMSE of about 1.5e-5 for uniform activations.
inline constexpr double tol_q8_activations = 1e-4;
// Prompt products through a vendor BLAS with F16 or dequantized weights: it multiplies binary16 by
// binary16 only, so the activations (and Q4_0/Q8_0 weights) are rounded to binary16 first, a
// relative error of at most 2^-11 each, an NMSE near 1e-7; the sums stay float.
inline constexpr double tol_f16_activations = 1e-6;

inline constexpr uint32_t F32 = 0;
inline constexpr uint32_t F16 = 1;
inline constexpr uint32_t Q4_0 = 2;
inline constexpr uint32_t Q8_0 = 8;
inline constexpr uint32_t I32 = 18;

// Tensors start this far into their buffer unless a test asks for another offset, so a kernel
// that ignores offsets fails.
inline constexpr std::size_t default_offset = 32;

// One tensor on both sides: at[0] on the backend under test, at[1] on the oracle.
struct twin {
    pib_tensor at[2];
};

enum side : int { under_test = 0, oracle = 1 };

// The backends of this run, set by main before any test runs.
struct backends {
    pib_backend be[2];
    std::string name;     // "cpu", "gpusim", "cuda", "hip"
    bool verbose = false; // print every comparison's NMSE
    // The module multiplies prompts (more than 16 tokens) with a vendor BLAS (its device
    // description says "prompts: cuBLAS ..." or "prompts: hipBLAS ...").
    bool vendor_gemm = false;
    // The CPU runs its F16 products in binary16 arithmetic (device "cpu (neon_fp16)"): the
    // activations are rounded to binary16 first.
    bool half_products = false;
};
backends& current();

class bench {
  public:
    bench() = default;
    ~bench();
    bench(const bench&) = delete;
    bench& operator=(const bench&) = delete;

    // A tensor of ne1 rows of ne0 elements from packed host rows (elements of `type`), rows
    // `pad` elements longer than needed and the gaps filled with garbage.
    twin raw(uint32_t type, int64_t ne0, int64_t ne1, const void* packed, std::size_t pad = 0,
             std::size_t offset = default_offset);
    twin f32(int64_t ne0, int64_t ne1, std::span<const float> v, std::size_t pad = 0,
             std::size_t offset = default_offset);
    // F16 from floats rounded to half.
    twin f16(int64_t ne0, int64_t ne1, std::span<const float> v, std::size_t pad = 0,
             std::size_t offset = default_offset);
    // F32, F16, or a quantized type (lib/quant's reference quantizer, ne0 a multiple of its
    // block); `pad` counts elements for F32/F16 and blocks for quantized types.
    twin typed(uint32_t type, int64_t ne0, int64_t ne1, std::span<const float> v,
               std::size_t pad = 0, std::size_t offset = default_offset);
    twin i32(int64_t ne0, int64_t ne1, std::span<const int32_t> v);

    // Runs f(vtable, ctx, side) on both sides; both must return `want`.
    template <class F> void run(F&& f, int want = PIB_OK) {
        for (int s : {under_test, oracle}) {
            const pib_backend& b = current().be[s];
            const int st = f(*b.vt, b.ctx, s);
            INFO("side " << (s == under_test ? current().name : std::string("oracle")));
            REQUIRE(st == want);
        }
    }

    // The rows of t on side s (elements of t's type, packed).
    std::vector<unsigned char> read(const twin& t, int s) const;
    std::vector<float> read_f32(const twin& t, int s) const;
    std::vector<int32_t> read_i32(const twin& t, int s) const;

    // NMSE of the under-test side of an F32 or F16 tensor against the oracle's, which must be
    // at most `tol`.
    void expect_close(const twin& t, double tol, const std::string& what) const;

  private:
    std::vector<pib_buffer*> buffers_[2];
};

// The tolerance of mul_mat and mul_mat_sparse with weights of `type` on the backend under test:
// the CPU's fast kernels quantize the activations of Q4_0/Q8_0 products (tol_q8_activations);
// the GPU kernels dequantize the weights and sum in float (tol_reduction); a vendor BLAS takes
// non-F32 products of more than 16 tokens in binary16, and the CPU's neon_fp16 level every F16
// product (tol_f16_activations).
double tol_product(uint32_t type, int64_t tokens = 1);

// The type's name for labels ("F32", "Q4_0").
std::string type_name(uint32_t type);

std::vector<float> random_floats(std::size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// The normalized mean squared error of got against want (0 when both are all zeros).
double nmse(std::span<const float> got, std::span<const float> want);

} // namespace pi::conformance
