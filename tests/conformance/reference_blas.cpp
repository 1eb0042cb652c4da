// A CPU library with the cuBLAS C API entry points the GPU modules call (cublas_entry.hpp), for
// the simulated module only: with POWERINFER_GPU_SIM_BLAS naming it, the simulation's prompt
// products take the module's BLAS path (gpu_blas.cu: staging, dequantized slabs, transposes,
// leading dimensions) and the conformance suite checks them against the CPU backend. It keeps
// cuBLAS's documented contract for cublasGemmEx (column-major, the argument checks, host
// pointer mode) and counts the calls it served and those it refused, so that a test can tell
// the path was taken and never fell back.
#include "gpu_common/cublas_entry.hpp"
#include "gpu_common/gpu_math.hpp"

#include <atomic>
#include <cstdio>

namespace {

namespace cb = pi::gpu::cublas;

// cublasStatus_t values of the errors this library returns.
constexpr cb::status not_initialized = 1, invalid_value = 7, not_supported = 15;

struct handle_state {
    static constexpr unsigned live_tag = 0x62'6c'61'73;
    unsigned tag = live_tag;
    void* stream = nullptr;
};

std::atomic<long> gemms_served{0}, gemms_refused{0};

cb::status refuse(cb::status s, const char* why) {
    gemms_refused.fetch_add(1);
    std::fprintf(stderr, "reference BLAS: cublasGemmEx refused: %s\n", why);
    return s;
}

// Element (row, col) of a column-major matrix of `type` with leading dimension ld.
float element(const void* m, int type, int ld, int row, int col) {
    const long at = static_cast<long>(col) * ld + row;
    if (type == cb::r_32f) return static_cast<const float*>(m)[at];
    return pi::gpu::half_to_float(static_cast<const uint16_t*>(m)[at]);
}

bool live(cb::handle h) {
    return h != nullptr && reinterpret_cast<handle_state*>(h)->tag == handle_state::live_tag;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) cb::status cublasCreate_v2(cb::handle* h) {
    if (h == nullptr) return invalid_value;
    *h = reinterpret_cast<cb::handle>(new handle_state);
    return cb::success;
}

__attribute__((visibility("default"))) cb::status cublasDestroy_v2(cb::handle h) {
    if (!live(h)) return not_initialized;
    auto* s = reinterpret_cast<handle_state*>(h);
    s->tag = 0;
    delete s;
    return cb::success;
}

__attribute__((visibility("default"))) cb::status cublasSetStream_v2(cb::handle h, void* stream) {
    if (!live(h)) return not_initialized;
    reinterpret_cast<handle_state*>(h)->stream = stream;
    return cb::success;
}

// This library is no cuBLAS release: it has no version to give.
__attribute__((visibility("default"))) cb::status cublasGetProperty(int, int*) {
    return invalid_value;
}

// C = alpha op(A) op(B) + beta C with float sums. The simulation runs every launch at once, so
// computing now keeps the stream's order.
__attribute__((visibility("default"))) cb::status
cublasGemmEx(cb::handle h, int transa, int transb, int m, int n, int k, const void* alpha,
             const void* a, int a_type, int lda, const void* b, int b_type, int ldb,
             const void* beta, void* c, int c_type, int ldc, int compute_type, int algo) {
    if (!live(h)) return refuse(not_initialized, "not a live handle");
    const auto op_ok = [](int op) { return op == cb::op_n || op == cb::op_t; };
    if (!op_ok(transa) || !op_ok(transb)) return refuse(invalid_value, "an operation not N or T");
    if (m < 0 || n < 0 || k < 0) return refuse(invalid_value, "a negative dimension");
    const int a_rows = transa == cb::op_n ? m : k, b_rows = transb == cb::op_n ? k : n;
    if (lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1))
        return refuse(invalid_value, "a leading dimension below its matrix's rows");
    if (a_type != b_type || (a_type != cb::r_32f && a_type != cb::r_16f) || c_type != cb::r_32f ||
        compute_type != cb::compute_32f || algo != cb::gemm_default)
        return refuse(not_supported, "a type combination outside F32/F16 x F16/F32 -> F32");
    if (alpha == nullptr || beta == nullptr || (m > 0 && n > 0 && c == nullptr) ||
        (m > 0 && n > 0 && k > 0 && (a == nullptr || b == nullptr)))
        return refuse(invalid_value, "a null pointer");
    const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
    auto* out = static_cast<float*>(c);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            float sum = 0.0f;
            for (int p = 0; p < k; ++p) {
                const float av = transa == cb::op_n ? element(a, a_type, lda, i, p)
                                                    : element(a, a_type, lda, p, i);
                const float bv = transb == cb::op_n ? element(b, b_type, ldb, p, j)
                                                    : element(b, b_type, ldb, j, p);
                sum += av * bv;
            }
            float& cij = out[static_cast<long>(j) * ldc + i];
            cij = be == 0.0f ? al * sum : al * sum + be * cij; // beta 0: C is not read
        }
    gemms_served.fetch_add(1);
    return cb::success;
}

// Not of cuBLAS: the calls served and refused since the library was loaded.
__attribute__((visibility("default"))) void pi_reference_blas_counts(long* served, long* refused) {
    if (served != nullptr) *served = gemms_served.load();
    if (refused != nullptr) *refused = gemms_refused.load();
}

} // extern "C"
