#pragma once
// Per-thread math of the GPU kernels, shared with the host: the same functions run inside the
// CUDA/HIP kernels and in the CPU unit test (tests/conformance/test_gpu_math.cpp) that checks
// them against the reference (lib/quant fp16 conversion, the CPU kernels' formulas). Nothing
// here includes a GPU runtime header, so a plain C++ compiler builds it too.
//
// A weight type is one traits struct: `unit` elements that one thread converts at once, the
// byte alignment its loads need, load_unit (unit elements to floats) and load (one element); the
// element-wise F32 and F16 structs also store (activations, KV cache). Every kernel that reads
// weights is a template over such a struct, so adding a type is one struct here plus one case in
// each dispatch (gpu_dispatch.hpp).
#include "quant/blocks.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define PI_HD __host__ __device__ __forceinline__
#else
#define PI_HD inline
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define PI_GPU_DEVICE_PASS 1
#endif

namespace pi::gpu {

PI_HD uint32_t bits_of(float f) {
#ifdef PI_GPU_DEVICE_PASS
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

PI_HD float float_of(uint32_t u) {
#ifdef PI_GPU_DEVICE_PASS
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// binary16 -> binary32, exact for every finite value and infinity (NaN stays NaN).
PI_HD float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        // Zero or subnormal: mant * 2^-24, exact in binary32.
        return float_of(sign | bits_of(static_cast<float>(mant) * 5.9604644775390625e-8f));
    }
    if (exp == 0x1f) return float_of(sign | 0x7f800000u | mant << 13);
    return float_of(sign | (exp + 127 - 15) << 23 | mant << 13);
}

// binary32 -> binary16, round to nearest even, overflow to infinity, NaN to 0x7e00: bit for
// bit what pi::fp32_to_fp16 gives, so a KV cache written on a GPU equals the CPU's.
PI_HD uint16_t float_to_half(float f) {
    const uint32_t x = bits_of(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
    if (abs < 0x38800000u) {
        // The float sum rounds the mantissa at the subnormal half's precision.
        const float v = float_of(abs) + 0.5f;
        return static_cast<uint16_t>(sign | (bits_of(v) - 0x3f000000u));
    }
    const uint32_t mant_odd = (abs >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((abs + 0xc8000fffu + mant_odd) >> 13));
}

// 16 bytes from a 16-byte aligned address: one vector load on the device.
PI_HD void load16(const unsigned char* p, uint32_t (&out)[4]) {
#ifdef PI_GPU_DEVICE_PASS
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
#else
    std::memcpy(out, p, sizeof out);
#endif
}

// 2 bytes from a 2-byte aligned address.
PI_HD uint16_t load2(const unsigned char* p) {
#ifdef PI_GPU_DEVICE_PASS
    return *reinterpret_cast<const uint16_t*>(p);
#else
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
#endif
}

// 4 bytes from a 4-byte aligned address.
PI_HD uint32_t load4(const unsigned char* p) {
#ifdef PI_GPU_DEVICE_PASS
    return *reinterpret_cast<const uint32_t*>(p);
#else
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
#endif
}

// ---- byte ranges read as aligned words ----
//
// Quantized rows start on 2 bytes only, so the kernels read a run of their bytes [begin, end)
// (both even) as the 4-byte aligned words that hold it: word w lies at begin rounded down to 4
// bytes plus 4 w, and the byte at begin sits at byte offset begin % 4 of the words. Adjacent
// threads load adjacent words, every load aligned; the first and the last word may hold only 2
// bytes of the range, which are loaded with a 2-byte load, so no byte outside the range is read
// (a row may end where its allocation does) and those outside read as zero.

PI_HD int range_words(const unsigned char* begin, const unsigned char* end) {
    return static_cast<int>((reinterpret_cast<std::uintptr_t>(begin) % 4 + (end - begin) + 3) / 4);
}

// Word w < range_words(begin, end) of the range.
PI_HD uint32_t range_word(const unsigned char* begin, const unsigned char* end, int w) {
    const unsigned char* a = begin - reinterpret_cast<std::uintptr_t>(begin) % 4 + 4 * w;
    if (a < begin) return static_cast<uint32_t>(load2(begin)) << 16;
    if (end - a < 4) return load2(a);
    return load4(a);
}

// The byte at byte offset off of words.
PI_HD uint32_t byte_in_words(const uint32_t* words, int off) {
    return (words[off / 4] >> (off % 4 * 8)) & 0xffu;
}

// The 2 bytes at byte offset off (even) of words, little-endian.
PI_HD uint32_t half_in_words(const uint32_t* words, int off) {
    return (words[off / 4] >> (off % 4 * 8)) & 0xffffu;
}

// The 8 bytes at byte offset off (even) of words as two little-endian words. Reads the word
// after them too, and discards it when off is a multiple of 4: one instruction stream for
// either alignment, so lanes on blocks of both parities do not diverge.
PI_HD void bytes8_in_words(const uint32_t* words, int off, uint32_t& lo, uint32_t& hi) {
    const int w = off / 4;
    const int shift = off % 4 * 8;
    const uint64_t first = static_cast<uint64_t>(words[w + 1]) << 32 | words[w];
    const uint64_t second = static_cast<uint64_t>(words[w + 2]) << 32 | words[w + 1];
    lo = static_cast<uint32_t>(first >> shift);
    hi = static_cast<uint32_t>(second >> shift);
}

// ---- weight types ----

struct w_f32 {
    static constexpr int unit = 1;
    static constexpr int align = 4;
    PI_HD static float load(const unsigned char* row, int64_t i) {
        return reinterpret_cast<const float*>(row)[i];
    }
    PI_HD static void load_unit(const unsigned char* row, int64_t u, float (&v)[unit]) {
        v[0] = load(row, u);
    }
    PI_HD static void store(unsigned char* row, int64_t i, float v) {
        reinterpret_cast<float*>(row)[i] = v;
    }
};

// F32 rows that start on 16 bytes: four elements per load.
struct w_f32x4 {
    static constexpr int unit = 4;
    static constexpr int align = 16;
    PI_HD static float load(const unsigned char* row, int64_t i) { return w_f32::load(row, i); }
    PI_HD static void load_unit(const unsigned char* row, int64_t u, float (&v)[unit]) {
        uint32_t raw[4];
        load16(row + u * 16, raw);
        for (int e = 0; e < 4; ++e)
            v[e] = float_of(raw[e]);
    }
};

struct w_f16 {
    static constexpr int unit = 1;
    static constexpr int align = 2;
    PI_HD static float load(const unsigned char* row, int64_t i) {
        return half_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    }
    PI_HD static void load_unit(const unsigned char* row, int64_t u, float (&v)[unit]) {
        v[0] = load(row, u);
    }
    PI_HD static void store(unsigned char* row, int64_t i, float v) {
        reinterpret_cast<uint16_t*>(row)[i] = float_to_half(v);
    }
};

// F16 rows that start on 16 bytes: eight elements per load.
struct w_f16x8 {
    static constexpr int unit = 8;
    static constexpr int align = 16;
    PI_HD static float load(const unsigned char* row, int64_t i) { return w_f16::load(row, i); }
    PI_HD static void load_unit(const unsigned char* row, int64_t u, float (&v)[unit]) {
        uint32_t raw[4];
        load16(row + u * 16, raw);
        for (int e = 0; e < 4; ++e) {
            v[2 * e] = half_to_float(static_cast<uint16_t>(raw[e] & 0xffffu));
            v[2 * e + 1] = half_to_float(static_cast<uint16_t>(raw[e] >> 16));
        }
    }
};

// Quantized rows are runs of 32-element blocks (lib/quant/blocks.hpp), each a binary16 scale d
// and the codes, dequantized as lib/quant's reference does: float(code) * d, one rounding. A
// unit is a quarter block. Blocks are 34 and 18 bytes long, so only 2-byte loads are aligned at
// every block: load_unit and load read the row itself that way (the tiled product, gathers),
// while the mat-vec and sparse kernels first copy runs of blocks as aligned words (range_word
// above) and convert from those copies with unit_from_words and element_from_words, `blk`
// being a block's byte offset in the words.
template <class Block> struct quant_layout {
    static constexpr int64_t block = 32;
    static constexpr int64_t block_bytes = sizeof(Block);
    static constexpr int64_t codes = offsetof(Block, qs);
    static constexpr int unit = 8;
    static constexpr int units_per_block = block / unit;
    static constexpr int align = alignof(Block);

    PI_HD static const unsigned char* block_at(const unsigned char* row, int64_t b) {
        return row + b * block_bytes;
    }
    PI_HD static float scale(const unsigned char* blk) { return half_to_float(load2(blk)); }
};

// x = q * d, q a signed byte.
struct w_q8_0 : quant_layout<block_q8_0> {
    PI_HD static float code(uint32_t byte) {
        return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(byte)));
    }
    PI_HD static float load(const unsigned char* row, int64_t i) {
        const unsigned char* blk = block_at(row, i / block);
        return code(blk[codes + i % block]) * scale(blk);
    }
    PI_HD static void load_unit(const unsigned char* row, int64_t u, float (&v)[unit]) {
        const unsigned char* blk = block_at(row, u / units_per_block);
        const float d = scale(blk);
        const unsigned char* q = blk + codes + (u % units_per_block) * unit;
        for (int e = 0; e < unit; e += 2) {
            const uint32_t two = load2(q + e);
            v[e] = code(two & 0xffu) * d;
            v[e + 1] = code(two >> 8) * d;
        }
    }
    PI_HD static void unit_from_words(const uint32_t* words, int blk, int quarter,
                                      float (&v)[unit]) {
        const float d = half_to_float(static_cast<uint16_t>(half_in_words(words, blk)));
        uint32_t q[2];
        bytes8_in_words(words, blk + static_cast<int>(codes) + quarter * unit, q[0], q[1]);
        for (int e = 0; e < unit; ++e)
            v[e] = code(q[e / 4] >> (e % 4 * 8)) * d;
    }
    PI_HD static float element_from_words(const uint32_t* words, int blk, int j) {
        const float d = half_to_float(static_cast<uint16_t>(half_in_words(words, blk)));
        return code(byte_in_words(words, blk + static_cast<int>(codes) + j)) * d;
    }
};

// x = (q - 8) * d; element j < 16 is the low nibble of qs[j], element j + 16 the high nibble.
// Quarters 0 and 1 are low nibbles of qs[0..7] and qs[8..15], quarters 2 and 3 their high ones.
struct w_q4_0 : quant_layout<block_q4_0> {
    static constexpr int64_t half = block / 2;
    PI_HD static float code(uint32_t nibble) {
        return static_cast<float>(static_cast<int32_t>(nibble & 0xfu) - 8);
    }
    PI_HD static float load(const unsigned char* row, int64_t i) {
        const unsigned char* blk = block_at(row, i / block);
        const int64_t j = i % block;
        const uint32_t byte = blk[codes + j % half];
        return code(j < half ? byte : byte >> 4) * scale(blk);
    }
    PI_HD static void load_unit(const unsigned char* row, int64_t u, float (&v)[unit]) {
        const unsigned char* blk = block_at(row, u / units_per_block);
        const float d = scale(blk);
        const int quarter = static_cast<int>(u % units_per_block);
        const unsigned char* q = blk + codes + (quarter % 2) * unit;
        const int shift = quarter / 2 * 4;
        for (int e = 0; e < unit; e += 2) {
            const uint32_t two = load2(q + e);
            v[e] = code(two >> shift) * d;
            v[e + 1] = code(two >> (8 + shift)) * d;
        }
    }
    PI_HD static void unit_from_words(const uint32_t* words, int blk, int quarter,
                                      float (&v)[unit]) {
        const float d = half_to_float(static_cast<uint16_t>(half_in_words(words, blk)));
        uint32_t q[2];
        bytes8_in_words(words, blk + static_cast<int>(codes) + quarter % 2 * unit, q[0], q[1]);
        const int shift = quarter / 2 * 4;
        for (int e = 0; e < unit; ++e)
            v[e] = code(q[e / 4] >> (e % 4 * 8 + shift)) * d;
    }
    PI_HD static float element_from_words(const uint32_t* words, int blk, int j) {
        const float d = half_to_float(static_cast<uint16_t>(half_in_words(words, blk)));
        const uint32_t byte = byte_in_words(words, blk + static_cast<int>(codes) + j % half);
        return code(j < half ? byte : byte >> 4) * d;
    }
};

// The quantized traits: their rows are read through copies as aligned words.
template <class W>
concept quantized = requires {
    W::block_bytes;
};

// acc[m] += the sum over the unit's elements of v[m][e] * x[e]: one FMA chain per row in element
// order, so a row's sum has the same bits whether it is computed alone (M = 1) or with others
// that share each load of x (the joint up/gate product).
template <int M, int N>
PI_HD void dot_units(const float (&v)[M][N], const float* x, float (&acc)[M]) {
    for (int e = 0; e < N; ++e) {
        const float xe = x[e];
        for (int m = 0; m < M; ++m)
            acc[m] = fmaf(v[m][e], xe, acc[m]);
    }
}

// ---- activations ----

enum glu_kind : int32_t { glu_relu = 0, glu_silu = 1, glu_relu_relu = 2 }; // = pib_glu_kind

PI_HD float act_relu(float v) {
    return v > 0.0f ? v : 0.0f;
}

PI_HD float act_silu(float v) {
    return v / (1.0f + expf(-v));
}

PI_HD float act_glu(int32_t kind, float gate, float up) {
    switch (kind) {
    case glu_silu:
        return act_silu(gate) * up;
    case glu_relu_relu:
        return act_relu(gate) * act_relu(up);
    default:
        return act_relu(gate) * up;
    }
}

// ---- rotary embedding ----

// Angle of pair j at position pos: pos * freq_scale * freq_base^(-2j/n_rot), in double like the
// reference, because positions in the thousands leave a float angle with too few digits.
PI_HD double rope_theta(int32_t pos, int32_t j, int32_t n_rot, float freq_base, float freq_scale) {
    return static_cast<double>(pos) * freq_scale *
           pow(static_cast<double>(freq_base), -2.0 * j / static_cast<double>(n_rot));
}

// ---- softmax ----

// A running softmax over scores seen so far: max m, sum l = sum exp(s - m). Attention keeps one
// per thread group and merges them; acc vectors are rescaled by the factors merge returns.
struct softmax_state {
    float m;
    float l;
};

PI_HD softmax_state softmax_empty() {
    return softmax_state{-INFINITY, 0.0f};
}

// Adds score s; *scale_old is the factor for what was accumulated so far, *weight the weight of
// the new element.
PI_HD softmax_state softmax_push(softmax_state st, float s, float* scale_old, float* weight) {
    const float m = s > st.m ? s : st.m;
    *scale_old = st.l > 0.0f ? expf(st.m - m) : 0.0f;
    *weight = expf(s - m);
    return softmax_state{m, st.l * *scale_old + *weight};
}

// Merges b into a; *scale_a and *scale_b rescale their accumulators. An empty state (l == 0)
// contributes nothing, so merging never evaluates -inf - -inf.
PI_HD softmax_state softmax_merge(softmax_state a, softmax_state b, float* scale_a,
                                  float* scale_b) {
    if (b.l <= 0.0f) {
        *scale_a = 1.0f;
        *scale_b = 0.0f;
        return a;
    }
    if (a.l <= 0.0f) {
        *scale_a = 0.0f;
        *scale_b = 1.0f;
        return b;
    }
    const float m = a.m > b.m ? a.m : b.m;
    *scale_a = expf(a.m - m);
    *scale_b = expf(b.m - m);
    return softmax_state{m, a.l * *scale_a + b.l * *scale_b};
}

} // namespace pi::gpu
