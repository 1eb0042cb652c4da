#pragma once
// A CPU backend instance with host-side helpers to build tensors and read them back, plus the
// comparison helpers of the backend tests.
#include "cpu/cpu_backend.h"
#include "quant/types.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace pi::test {

inline constexpr uint32_t F32 = 0;
inline constexpr uint32_t F16 = 1;
inline constexpr uint32_t Q4_0 = 2;
inline constexpr uint32_t Q4_1 = 3;
inline constexpr uint32_t Q5_0 = 6;
inline constexpr uint32_t Q5_1 = 7;
inline constexpr uint32_t Q8_0 = 8;
inline constexpr uint32_t Q2_K = 10; // 256-element blocks of 84 bytes
inline constexpr uint32_t Q3_K = 11;
inline constexpr uint32_t Q4_K = 12;
inline constexpr uint32_t Q5_K = 13;
inline constexpr uint32_t Q6_K = 14;
inline constexpr uint32_t Q8_K =
    15; // 256-element blocks of 292 bytes; activations only, no kernel reads it
inline constexpr uint32_t I32 = 18;

// Every test tensor starts this far into its buffer, so a kernel that ignores offsets fails.
inline constexpr size_t tensor_offset = 32;

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v)
        x = dist(rng);
    return v;
}

// The values an F16 tensor built from v actually holds.
inline std::vector<float> through_half(std::vector<float> v) {
    for (float& x : v)
        x = fp16_to_fp32(fp32_to_fp16(x));
    return v;
}

// The fast kernel levels (pib_cpu_kernels) this machine runs, best last.
inline std::vector<int32_t> fast_levels() {
    std::vector<int32_t> out;
    for (int32_t level : {PIB_CPU_KERNELS_AVX2, PIB_CPU_KERNELS_AVX512, PIB_CPU_KERNELS_NEON,
                          PIB_CPU_KERNELS_NEON_DOTPROD, PIB_CPU_KERNELS_NEON_FP16}) {
        pib_backend b{};
        if (pib_cpu_backend_create_with(1, 0, level, &b) != PIB_OK) continue;
        b.vt->destroy(b.ctx);
        out.push_back(level);
    }
    return out;
}

// The F16 products of the neon_fp16 level round each activation to binary16 first (relative error
// at most 2^-11): 2^-11 of sum |w x| more than a float sum.
inline constexpr double half_rounding = 1.0 / 2048;

// The relative tolerance of products with weights of `type` on the level AUTO picks here.
inline double auto_level_tolerance(uint32_t type, double rel) {
    pib_backend b{};
    REQUIRE(pib_cpu_backend_create(1, 0, &b) == PIB_OK);
    pib_device_info info{};
    REQUIRE(b.vt->device_info(b.ctx, &info) == PIB_OK);
    const bool half = type == F16 && std::string(info.name) == "cpu (neon_fp16)";
    b.vt->destroy(b.ctx);
    return half ? rel + half_rounding : rel;
}

class cpu_device {
  public:
    explicit cpu_device(int32_t threads = 2, size_t capacity = 0,
                        int32_t kernels = PIB_CPU_KERNELS_AUTO) {
        REQUIRE(pib_cpu_backend_create_with(threads, capacity, kernels, &b_) == PIB_OK);
    }
    ~cpu_device() {
        for (pib_buffer* buf : buffers_)
            b_.vt->buffer_free(b_.ctx, buf);
        b_.vt->destroy(b_.ctx);
    }
    cpu_device(const cpu_device&) = delete;
    cpu_device& operator=(const cpu_device&) = delete;

    const pib_vtable& vt() const { return *b_.vt; }
    void* ctx() const { return b_.ctx; }

    // A tensor ne0 x ne1 whose rows are `pad` elements (blocks) longer than needed, filled from
    // packed rows.
    pib_tensor raw(uint32_t type, int64_t ne0, int64_t ne1, const void* packed, size_t pad = 0) {
        const size_t row = row_bytes(static_cast<ggml_type>(type), ne0);
        const size_t nb1 = row + pad * traits_of(type).type_size;
        pib_buffer* buf = nullptr;
        REQUIRE(vt().buffer_alloc(ctx(), tensor_offset + nb1 * static_cast<size_t>(ne1), &buf) ==
                PIB_OK);
        buffers_.push_back(buf);
        auto* base = static_cast<unsigned char*>(vt().buffer_host_ptr(ctx(), buf));
        std::memset(base, 0x7f, vt().buffer_size(ctx(), buf)); // garbage between rows
        for (int64_t r = 0; r < ne1 && packed != nullptr; ++r)
            std::memcpy(base + tensor_offset + nb1 * r,
                        static_cast<const unsigned char*>(packed) + row * r, row);
        return pib_tensor{type, ne0, ne1, nb1, buf, tensor_offset};
    }
    pib_tensor f32(int64_t ne0, int64_t ne1, std::span<const float> v, size_t pad = 0) {
        REQUIRE(v.size() == static_cast<size_t>(ne0 * ne1));
        return raw(F32, ne0, ne1, v.data(), pad);
    }
    pib_tensor f16(int64_t ne0, int64_t ne1, std::span<const float> v, size_t pad = 0) {
        REQUIRE(v.size() == static_cast<size_t>(ne0 * ne1));
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i)
            h[i] = fp32_to_fp16(v[i]);
        return raw(F16, ne0, ne1, h.data(), pad);
    }
    pib_tensor typed(uint32_t type, int64_t ne0, int64_t ne1, std::span<const float> v,
                     size_t pad = 0) {
        return type == F16 ? f16(ne0, ne1, v, pad) : f32(ne0, ne1, v, pad);
    }
    pib_tensor i32(int64_t ne0, int64_t ne1, std::span<const int32_t> v) {
        REQUIRE(v.size() == static_cast<size_t>(ne0 * ne1));
        return raw(I32, ne0, ne1, v.data());
    }
    pib_tensor zeros_f32(int64_t ne0, int64_t ne1, size_t pad = 0) {
        return f32(ne0, ne1, std::vector<float>(static_cast<size_t>(ne0 * ne1)), pad);
    }

    template <class T> std::vector<T> read(const pib_tensor& t) {
        const size_t row = row_bytes(static_cast<ggml_type>(t.type), t.ne0);
        std::vector<T> out(static_cast<size_t>(t.ne0 * t.ne1));
        for (int64_t r = 0; r < t.ne1; ++r)
            REQUIRE(vt().buffer_download(ctx(), t.buffer, t.offset + t.nb1 * r,
                                         out.data() + t.ne0 * r, row) == PIB_OK);
        return out;
    }
    std::vector<float> read_f32(const pib_tensor& t) { return read<float>(t); }
    std::vector<float> read_f16(const pib_tensor& t) {
        std::vector<float> out;
        for (uint16_t h : read<uint16_t>(t))
            out.push_back(fp16_to_fp32(h));
        return out;
    }

  private:
    pib_backend b_{};
    std::vector<pib_buffer*> buffers_;
};

// |got[i] - want[i]| <= rel * scale[i] + abs_tol for every i, reporting the first failure.
inline void check_close(std::span<const float> got, std::span<const double> want,
                        std::span<const double> scale, double rel, double abs_tol) {
    REQUIRE(got.size() == want.size());
    size_t bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double s = scale.empty() ? std::fabs(want[i]) : scale[i];
        if (!(std::fabs(got[i] - want[i]) <= rel * s + abs_tol)) {
            if (bad++ == 0) first = i;
        }
    }
    INFO("first mismatch at " << first << ": got " << (bad ? got[first] : 0.0f) << " want "
                              << (bad ? want[first] : 0.0));
    CHECK(bad == 0);
}

inline bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Per-token active lists as the I32 tensors the sparse kernels take: idx rows of `capacity`
// entries (padding -7, never read), and the count of each row.
struct list_tensors {
    pib_tensor idx, count;
};

inline list_tensors upload_lists(cpu_device& d, const std::vector<std::vector<int32_t>>& lists,
                                 int64_t capacity) {
    std::vector<int32_t> idx(static_cast<size_t>(capacity) * lists.size(), -7);
    std::vector<int32_t> count;
    for (size_t t = 0; t < lists.size(); ++t) {
        std::copy(lists[t].begin(), lists[t].end(), idx.begin() + t * capacity);
        count.push_back(static_cast<int32_t>(lists[t].size()));
    }
    return {d.i32(capacity, static_cast<int64_t>(lists.size()), idx),
            d.i32(static_cast<int64_t>(lists.size()), 1, count)};
}

// The error scale of a product: scale[t][r] = sum_c |w[r][c] * x[t][c]|.
inline std::vector<double> product_scale(const std::vector<float>& w, const std::vector<float>& x,
                                         int64_t cols, int64_t rows, int64_t n_tok) {
    std::vector<double> s(static_cast<size_t>(rows * n_tok), 0.0);
    for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
                s[t * rows + r] +=
                    std::fabs(static_cast<double>(w[r * cols + c]) * x[t * cols + c]);
    return s;
}

struct mat_shape {
    int64_t cols, rows, n_tok;
};

} // namespace pi::test
