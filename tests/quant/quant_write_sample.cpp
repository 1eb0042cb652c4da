// Writes quantization samples for check_quants_with_gguf_py.py: the float input, and for every
// format our quantized bytes and our dequantization of them.
//   quant_write_sample OUT_DIR
// Blocks mix Gaussian data over a wide range of scales with the cases where the reference
// quantizers are easiest to get subtly wrong: exact .5 ties, opposite extremes of equal
// magnitude, zero and constant blocks, offsets far from zero, and values beyond the binary16
// range.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "quant/types.hpp"

namespace {

constexpr int64_t n_cols = 256;
constexpr int64_t n_rows = 512;

void fill_block(std::mt19937_64& rng, int kind, float* x) {
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::uniform_int_distribution<int> small(-16, 16);
    std::uniform_int_distribution<int> pos(0, 31);
    switch (kind) {
    case 0: { // Gaussian, scale 1e-20 .. 1e4
        const float scale = std::pow(10.0f, -20.0f + 24.0f * unit(rng));
        for (int j = 0; j < 32; ++j)
            x[j] = scale * gauss(rng);
        break;
    }
    case 1: { // small integers times a power of two: many codes land exactly on .5
        const float scale = std::ldexp(1.0f, pos(rng) - 16);
        for (int j = 0; j < 32; ++j)
            x[j] = scale * static_cast<float>(small(rng));
        break;
    }
    case 2: // halves up to 127: Q8_0 ties round away from zero
        for (int j = 0; j < 32; ++j)
            x[j] = 0.5f * static_cast<float>(small(rng) * 8 + pos(rng) % 8);
        x[pos(rng)] = 127.0f;
        break;
    case 3: { // zero, negative zero or constant
        const float c = pos(rng) % 3 == 0 ? 0.0f : pos(rng) % 2 == 0 ? -0.0f : gauss(rng);
        for (int j = 0; j < 32; ++j)
            x[j] = c;
        break;
    }
    case 4: { // the largest magnitude appears with both signs
        for (int j = 0; j < 32; ++j)
            x[j] = gauss(rng);
        const float a = 4.0f + unit(rng);
        x[pos(rng)] = a;
        x[pos(rng)] = -a;
        break;
    }
    case 5: // offset far from zero: the min/max formats' m carries the block
        for (int j = 0; j < 32; ++j)
            x[j] = 100.0f + 0.01f * gauss(rng);
        break;
    case 6: // near and beyond the binary16 range (scales overflow to inf, as in ggml)
        for (int j = 0; j < 32; ++j)
            x[j] = gauss(rng);
        x[pos(rng)] = pos(rng) % 2 ? 65504.0f : -65504.0f;
        if (pos(rng) % 4 == 0) x[pos(rng)] = pos(rng) % 2 ? 1e30f : -1e30f;
        break;
    default: // positive-only uniform data
        for (int j = 0; j < 32; ++j)
            x[j] = unit(rng);
        break;
    }
}

bool write_file(const std::string& path, const void* data, size_t n) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const bool ok = std::fwrite(data, 1, n, f) == n;
    return std::fclose(f) == 0 && ok;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: quant_write_sample OUT_DIR\n");
        return 2;
    }
    const std::string dir = argv[1];
    std::mt19937_64 rng(20240607);
    std::vector<float> input(n_rows * n_cols);
    for (int64_t b = 0; b < n_rows * n_cols / 32; ++b)
        fill_block(rng, static_cast<int>(b % 8), input.data() + b * 32);
    if (!write_file(dir + "/input.f32", input.data(), input.size() * sizeof(float))) {
        std::fprintf(stderr, "quant_write_sample: cannot write %s/input.f32\n", dir.c_str());
        return 1;
    }
    for (pi::ggml_type t : {pi::ggml_type::f16, pi::ggml_type::q4_0, pi::ggml_type::q4_1,
                            pi::ggml_type::q5_0, pi::ggml_type::q5_1, pi::ggml_type::q8_0}) {
        const std::string name = pi::traits_of(t).name;
        const size_t row = pi::row_bytes(t, n_cols);
        std::vector<uint8_t> q(row * n_rows);
        std::vector<float> back(input.size());
        for (int64_t r = 0; r < n_rows; ++r) {
            const std::span<const float> src(input.data() + r * n_cols, n_cols);
            const std::span<uint8_t> dst(q.data() + r * row, row);
            if (!pi::quantize_row(t, src, dst) ||
                !pi::dequantize_row(t, dst, std::span<float>(back.data() + r * n_cols, n_cols))) {
                std::fprintf(stderr, "quant_write_sample: %s has no converter\n", name.c_str());
                return 1;
            }
        }
        if (!write_file(dir + "/" + name + ".bin", q.data(), q.size()) ||
            !write_file(dir + "/" + name + ".deq.f32", back.data(), back.size() * sizeof(float))) {
            std::fprintf(stderr, "quant_write_sample: cannot write %s files\n", name.c_str());
            return 1;
        }
    }
    return 0;
}
