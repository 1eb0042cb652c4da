// The vtable promises kernels that do not allocate on the hot path: after one warm-up call
// (which may grow per-thread or per-backend scratch), repeated calls of the same shapes make no
// heap allocation through operator new. Checked on one thread so that every allocation a kernel
// could make happens on the counting thread.
#include "backend_test_util.hpp"

#include <cstdlib>
#include <functional>
#include <new>

namespace {
thread_local bool counting = false;
thread_local long allocations = 0;
} // namespace

void* operator new(std::size_t n) {
    if (counting) ++allocations;
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
// Not inlined: GCC would otherwise pair the inlined free with a new-expression and warn about
// a mismatch that these replacements make correct.
[[gnu::noinline]] void operator delete(void* p) noexcept {
    std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

using namespace pi::test;

namespace {

template <class F> long allocations_of(F&& f) {
    allocations = 0;
    counting = true;
    const int status = f();
    counting = false;
    REQUIRE(status == PIB_OK);
    return allocations;
}

// rows x cols weights quantized to `type`, rows packed.
std::vector<unsigned char> quantized(uint32_t type, int64_t cols, int64_t rows, uint32_t seed) {
    const auto src = random_floats(static_cast<size_t>(cols * rows), seed);
    std::vector<unsigned char> out(pi::row_bytes(static_cast<pi::ggml_type>(type), cols) *
                                   static_cast<size_t>(rows));
    pi::traits_of(type).from_float(src.data(), out.data(), cols * rows);
    return out;
}

} // namespace

TEST_CASE("kernels make no heap allocation after a warm-up call, at every kernel level, for one "
          "token and for batches") {
    std::vector<int32_t> levels = {PIB_CPU_KERNELS_SCALAR};
    for (int32_t level : fast_levels())
        levels.push_back(level);
    for (int32_t level : levels) {
        for (int64_t n_tok : {1, 2, 9}) {
            CAPTURE(level);
            CAPTURE(n_tok);
            cpu_device d(1, 0, level);
            const auto& vt = d.vt();
            const auto n = static_cast<size_t>(n_tok);
            const pib_tensor w = d.f16(24, 40, random_floats(24 * 40, 1));
            const pib_tensor x = d.f32(24, n_tok, random_floats(24 * n, 2));
            const pib_tensor y = d.zeros_f32(40, n_tok);
            const pib_tensor p = d.f32(40, n_tok, random_floats(40 * n, 3));
            const pib_tensor idx = d.i32(40, n_tok, std::vector<int32_t>(40 * n, 0));
            const pib_tensor count = d.i32(n_tok, 1, std::vector<int32_t>(n, 0));
            const pib_tensor wt = d.f32(24, 40, random_floats(24 * 40, 4));
            const pib_tensor out24 = d.zeros_f32(24, n_tok);
            const pib_tensor q = d.f32(24, n_tok, random_floats(24 * n, 5));
            const pib_tensor kv = d.f16(12, 9, random_floats(108, 6));
            std::vector<int32_t> positions(n);
            for (size_t t = 0; t < n; ++t)
                positions[t] = static_cast<int32_t>(3 + t % 6);
            const pib_tensor q_pos = d.i32(n_tok, 1, positions);
            const pib_tensor kv_pos = d.i32(9, 1, std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
            const pib_tensor norm_w = d.f32(24, 1, random_floats(24, 7));
            const pib_attention_params ap{4, 2, 6, 9, 0.4f};
            const pib_rope_params rp{4, 6, 6, PIB_ROPE_NEOX, 10000.0f, 1.0f};
            const auto q4_blocks = quantized(Q4_0, 32, 40, 8);
            const auto q8_blocks = quantized(Q8_0, 32, 40, 9);
            const pib_tensor w_q4 = d.raw(Q4_0, 32, 40, q4_blocks.data());
            const pib_tensor wt_q8 = d.raw(Q8_0, 32, 40, q8_blocks.data());
            const pib_tensor x32 = d.f32(32, n_tok, random_floats(32 * n, 10));
            const pib_tensor out32 = d.zeros_f32(32, n_tok);
            const pib_tensor ids = d.i32(n_tok, 1, positions);

            const size_t attention_call = 4;
            const std::function<int()> calls[] = {
                [&] { return vt.mul_mat(d.ctx(), &w, &x, &y); },
                [&] { return vt.select_active(d.ctx(), &p, 0.0f, &idx, &count); },
                [&] { return vt.mul_mat_sparse(d.ctx(), &w, &x, &idx, &count, &y); },
                [&] { return vt.axpy_sparse(d.ctx(), &wt, &y, &idx, &count, &out24); },
                [&] { return vt.attention(d.ctx(), &q, &kv, &kv, &q_pos, &kv_pos, &ap, &out24); },
                [&] { return vt.rope(d.ctx(), &out24, &q_pos, &rp); },
                [&] { return vt.rms_norm(d.ctx(), &out24, &norm_w, 1e-6f, &out24); },
                [&] { return vt.glu(d.ctx(), &out24, &q, PIB_GLU_SILU, &out24); },
                [&] { return vt.add(d.ctx(), &out24, &q, &out24); },
                [&] { return vt.mul_mat(d.ctx(), &w_q4, &x32, &y); },
                [&] { return vt.mul_mat_sparse(d.ctx(), &w_q4, &x32, &idx, &count, &y); },
                [&] { return vt.axpy_sparse(d.ctx(), &wt_q8, &y, &idx, &count, &out32); },
                [&] { return vt.get_rows(d.ctx(), &wt_q8, &ids, &out32); },
            };
            for (size_t i = 0; i < std::size(calls); ++i) {
                CAPTURE(i);
                const long warm_up = allocations_of(calls[i]);
                // The counter does see the scalar attention's scratch grow.
                if (i == attention_call && level == PIB_CPU_KERNELS_SCALAR) CHECK(warm_up > 0);
                CHECK(allocations_of(calls[i]) == 0);
            }
        }
    }
}
