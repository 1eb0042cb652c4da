#include "conformance.hpp"

#include "quant/types.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace pi::conformance {

backends& current() {
    static backends b{};
    return b;
}

bench::~bench() {
    for (int s : {under_test, oracle})
        for (pib_buffer* buf : buffers_[s])
            current().be[s].vt->buffer_free(current().be[s].ctx, buf);
}

twin bench::raw(uint32_t type, int64_t ne0, int64_t ne1, const void* packed, std::size_t pad,
                std::size_t offset) {
    const std::size_t row = row_bytes(static_cast<ggml_type>(type), ne0);
    const std::size_t nb1 = row + pad * traits_of(type).type_size;
    const std::size_t size = offset + nb1 * static_cast<std::size_t>(ne1);
    std::vector<unsigned char> image(size, 0x7f); // garbage between rows
    for (int64_t r = 0; r < ne1 && packed != nullptr; ++r)
        std::memcpy(image.data() + offset + nb1 * r,
                    static_cast<const unsigned char*>(packed) + row * r, row);
    twin t{};
    for (int s : {under_test, oracle}) {
        const pib_backend& b = current().be[s];
        pib_buffer* buf = nullptr;
        REQUIRE(b.vt->buffer_alloc(b.ctx, size, &buf) == PIB_OK);
        buffers_[s].push_back(buf);
        REQUIRE(b.vt->buffer_upload(b.ctx, buf, 0, image.data(), size) == PIB_OK);
        t.at[s] = pib_tensor{type, ne0, ne1, nb1, buf, offset};
    }
    return t;
}

twin bench::f32(int64_t ne0, int64_t ne1, std::span<const float> v, std::size_t pad,
                std::size_t offset) {
    REQUIRE(v.size() == static_cast<std::size_t>(ne0 * ne1));
    return raw(F32, ne0, ne1, v.data(), pad, offset);
}

twin bench::f16(int64_t ne0, int64_t ne1, std::span<const float> v, std::size_t pad,
                std::size_t offset) {
    REQUIRE(v.size() == static_cast<std::size_t>(ne0 * ne1));
    std::vector<uint16_t> h(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
        h[i] = fp32_to_fp16(v[i]);
    return raw(F16, ne0, ne1, h.data(), pad, offset);
}

twin bench::typed(uint32_t type, int64_t ne0, int64_t ne1, std::span<const float> v,
                  std::size_t pad, std::size_t offset) {
    if (type == F32) return f32(ne0, ne1, v, pad, offset);
    if (type == F16) return f16(ne0, ne1, v, pad, offset);
    REQUIRE(v.size() == static_cast<std::size_t>(ne0 * ne1));
    const type_traits tt = traits_of(type);
    REQUIRE((tt.from_float != nullptr));
    REQUIRE(ne0 % tt.block_size == 0);
    const std::size_t row = row_bytes(static_cast<ggml_type>(type), ne0);
    std::vector<unsigned char> q(row * static_cast<std::size_t>(ne1));
    for (int64_t r = 0; r < ne1; ++r)
        tt.from_float(v.data() + r * ne0, q.data() + row * r, ne0);
    return raw(type, ne0, ne1, q.data(), pad, offset);
}

twin bench::i32(int64_t ne0, int64_t ne1, std::span<const int32_t> v) {
    REQUIRE(v.size() == static_cast<std::size_t>(ne0 * ne1));
    return raw(I32, ne0, ne1, v.data());
}

std::vector<unsigned char> bench::read(const twin& t, int s) const {
    const pib_backend& b = current().be[s];
    const pib_tensor& x = t.at[s];
    const std::size_t row = row_bytes(static_cast<ggml_type>(x.type), x.ne0);
    std::vector<unsigned char> out(row * static_cast<std::size_t>(x.ne1));
    for (int64_t r = 0; r < x.ne1; ++r)
        REQUIRE(b.vt->buffer_download(b.ctx, x.buffer, x.offset + x.nb1 * r, out.data() + row * r,
                                      row) == PIB_OK);
    return out;
}

std::vector<float> bench::read_f32(const twin& t, int s) const {
    const std::vector<unsigned char> bytes = read(t, s);
    const uint32_t type = t.at[s].type;
    REQUIRE((type == F32 || type == F16));
    const std::size_t n = bytes.size() / (type == F32 ? 4 : 2);
    std::vector<float> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        if (type == F32) {
            std::memcpy(&out[i], bytes.data() + 4 * i, 4);
        } else {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            out[i] = fp16_to_fp32(h);
        }
    }
    return out;
}

std::vector<int32_t> bench::read_i32(const twin& t, int s) const {
    const std::vector<unsigned char> bytes = read(t, s);
    std::vector<int32_t> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
}

void bench::expect_close(const twin& t, double tol, const std::string& what) const {
    const std::vector<float> got = read_f32(t, under_test);
    const std::vector<float> want = read_f32(t, oracle);
    if (tol == exact) {
        const bool same = std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
        if (current().verbose)
            std::printf("%s: %s\n", what.c_str(), same ? "bit-exact" : "DIFFERS");
        INFO(what << ": expected bit-exact results");
        CHECK(same);
        return;
    }
    const double e = nmse(got, want);
    if (current().verbose) std::printf("%s: NMSE %.3g (tolerance %.3g)\n", what.c_str(), e, tol);
    INFO(what << ": NMSE " << e << " (tolerance " << tol << ")");
    CHECK(e <= tol);
}

double tol_product(uint32_t type, int64_t tokens) {
    if (current().vendor_gemm && tokens > 16 && type != F32) return tol_f16_activations;
    if (current().half_products && type == F16) return tol_f16_activations;
    const bool quantized = type == Q4_0 || type == Q8_0;
    return quantized && current().name == "cpu" ? tol_q8_activations : tol_reduction;
}

std::string type_name(uint32_t type) {
    const char* name = traits_of(type).name;
    return name != nullptr ? name : "type " + std::to_string(type);
}

std::vector<float> random_floats(std::size_t n, uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v)
        x = dist(rng);
    return v;
}

double nmse(std::span<const float> got, std::span<const float> want) {
    if (got.size() != want.size()) return INFINITY;
    double err = 0.0, ref = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double d = static_cast<double>(got[i]) - want[i];
        err += d * d;
        ref += static_cast<double>(want[i]) * want[i];
    }
    if (!std::isfinite(err)) return INFINITY;
    if (ref == 0.0) return err == 0.0 ? 0.0 : INFINITY;
    return err / ref;
}

} // namespace pi::conformance
