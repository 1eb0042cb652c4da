#pragma once
// What a vector type V must provide for the loops of simd_impl.hpp and simd_quant_impl.hpp:
// quant_vector, whose float part is float_vector. Each instruction-set file defines its V
// (simd_avx2.cpp, simd_avx512_vec.hpp); both templates require quant_vector, so a missing or
// mistyped member is named where the table is built rather than deep inside a loop.
#include <immintrin.h>

#include <concepts>
#include <cstdint>

namespace pi::cpu::simd {

template <class V>
concept float_vector = requires(typename V::vec a, typename V::vec b, const float* f,
                                const uint16_t* h, float* out, int64_t n, const void* p,
                                int32_t* indices, uint32_t bits) {
    typename V::vec;
    // Lanes per register and the register-tile shapes: tile_rows x tile_tokens for prompt
    // batches, decode_rows for one token, gather_tokens for row-sparse batches.
    requires(V::lanes > 0 && V::tile_rows > 0 && V::tile_tokens > 0);
    requires(V::decode_rows > 0 && V::gather_tokens > 0);

    { V::zero() } -> std::same_as<typename V::vec>;
    { V::set1(1.0f) } -> std::same_as<typename V::vec>;
    // Loads of F32 or F16 columns; load_n reads the first n lanes and zeroes the others.
    { V::load(f) } -> std::same_as<typename V::vec>;
    { V::load(h) } -> std::same_as<typename V::vec>;
    { V::load_n(f, n) } -> std::same_as<typename V::vec>;
    { V::load_n(h, n) } -> std::same_as<typename V::vec>;
    V::store(out, a);
    V::store_n(out, a, n);
    // fma(a, b, c) = a * b + c, fused.
    { V::fma(a, b, a) } -> std::same_as<typename V::vec>;
    { V::add(a, b) } -> std::same_as<typename V::vec>;
    { V::sub(a, b) } -> std::same_as<typename V::vec>;
    { V::mul(a, b) } -> std::same_as<typename V::vec>;
    { V::div(a, b) } -> std::same_as<typename V::vec>;
    { V::min(a, b) } -> std::same_as<typename V::vec>;
    { V::max(a, b) } -> std::same_as<typename V::vec>;
    { V::round_nearest(a) } -> std::same_as<typename V::vec>;
    // scale_pow2(p, n) = p * 2^n for integral n in [-126, 127].
    { V::scale_pow2(a, b) } -> std::same_as<typename V::vec>;
    // The horizontal sum, in a fixed order; the first lane; a bit per lane where a >= b.
    { V::sum(a) } -> std::same_as<float>;
    { V::first(a) } -> std::same_as<float>;
    { V::ge_mask(a, b) } -> std::same_as<uint32_t>;
    // prefetch to L1; prefetch_far to L2, for data needed after more than an L1 of other reads.
    V::prefetch(p);
    V::prefetch_far(p);

    // Where compress_indices is true, store_indices(out, bits, c) writes c + k for each set bit
    // k of bits, ascending; otherwise the caller writes them one by one.
    { V::compress_indices } -> std::convertible_to<bool>;
    requires(!V::compress_indices || requires { V::store_indices(indices, bits, n); });
};

template <class V>
concept quant_vector = float_vector<V> &&
    requires(typename V::vec a, typename V::ivec i, typename V::ivec j, const void* p,
             const float* f, const uint16_t* h, __m256 eight) {
    typename V::ivec;
    // Consecutive blocks of one product per register (one per 256-bit half); whether dot is
    // VNNI's; the tile shapes q_tokens (tokens of a dense batch), q_decode (rows of one token,
    // sparse) and q_gather (tokens of one row, sparse).
    requires(V::blocks == 1 || V::blocks == 2);
    { V::vnni } -> std::convertible_to<bool>;
    requires(V::q_tokens > 0 && V::q_decode > 0 && V::q_gather > 0);

    // A binary16 value per block, from h[k], broadcast to block k's lanes.
    { V::halves(h) } -> std::same_as<typename V::vec>;
    // V::blocks consecutive 32-byte chunks.
    { V::iload(p) } -> std::same_as<typename V::ivec>;
    { V::fload(f) } -> std::same_as<typename V::vec>;
    // acc + the sums of four products u * x per 32-bit lane, u unsigned; dot_signed(w, x) the
    // same for signed w (the kernels use it without VNNI).
    { V::dot(i, i, j) } -> std::same_as<typename V::ivec>;
    { V::dot_signed(i, j) } -> std::same_as<typename V::ivec>;
    { V::iadd(i, j) } -> std::same_as<typename V::ivec>;
    // int32 lanes to float; the same bits seen as floats.
    { V::cvt(i) } -> std::same_as<typename V::vec>;
    { V::as_float(i) } -> std::same_as<typename V::vec>;

    // The shuffles of the transposes and lane sums. join_lo and join_hi interleave the even
    // 128-bit lanes of their arguments, or the odd ones; pair_rows puts the codes of rows a and
    // a + 8 into register a (of row a alone with one block per register); from_halves builds a
    // register of the blocks' eight lanes each; half_of(v, k) gives the eight floats of block k.
    { V::unpacklo32(i, j) } -> std::same_as<typename V::ivec>;
    { V::unpackhi32(i, j) } -> std::same_as<typename V::ivec>;
    { V::unpacklo64(i, j) } -> std::same_as<typename V::ivec>;
    { V::unpackhi64(i, j) } -> std::same_as<typename V::ivec>;
    { V::join_lo(i, j) } -> std::same_as<typename V::ivec>;
    { V::join_hi(i, j) } -> std::same_as<typename V::ivec>;
    requires requires(const __m256i* rows, typename V::ivec(&z)[8]) {
        V::pair_rows(rows, z);
    };
    requires requires(const __m256i(&halves)[V::blocks]) {
        { V::from_halves(halves) } -> std::same_as<typename V::ivec>;
    };
    eight = V::half_of(a, 0);

    // For dequantizing V::lanes columns: bytes widened to int32 lanes; lane_bits(bits, e0) is 16
    // in each lane k whose bit e0 + k of bits is set; srli and slli shift int32 lanes; isub8
    // subtracts per byte.
    requires requires(const uint8_t* u8, const int8_t* s8, uint32_t bits, int64_t e0, int n) {
        { V::widen_u8(u8) } -> std::same_as<typename V::ivec>;
        { V::widen_i8(s8) } -> std::same_as<typename V::ivec>;
        { V::lane_bits(bits, e0) } -> std::same_as<typename V::ivec>;
        { V::srli(i, n) } -> std::same_as<typename V::ivec>;
        { V::slli(i, n) } -> std::same_as<typename V::ivec>;
    };
    { V::iand(i, j) } -> std::same_as<typename V::ivec>;
    { V::ior(i, j) } -> std::same_as<typename V::ivec>;
    { V::ixor(i, j) } -> std::same_as<typename V::ivec>;
    { V::isub8(i, j) } -> std::same_as<typename V::ivec>;
    { V::iset8(int8_t{1}) } -> std::same_as<typename V::ivec>;
    { V::iset32(int32_t{1}) } -> std::same_as<typename V::ivec>;
    { V::izero() } -> std::same_as<typename V::ivec>;

    // With two blocks per register, one pointer per block: nibbles (the 32 codes of 16 packed
    // bytes), fifth_bits (0x10 for each set bit of a Q5 qh word) and join (32 bytes); and the
    // first chunk alone, the other lanes zero: iload_first, fload_first, ifirst.
    requires V::blocks == 1 || requires(const uint8_t* const* bytes, const void* const* chunks) {
        { V::nibbles(bytes) } -> std::same_as<typename V::ivec>;
        { V::fifth_bits(bytes) } -> std::same_as<typename V::ivec>;
        { V::join(chunks) } -> std::same_as<typename V::ivec>;
        { V::iload_first(p) } -> std::same_as<typename V::ivec>;
        { V::fload_first(f) } -> std::same_as<typename V::vec>;
        { V::ifirst(i) } -> std::same_as<typename V::ivec>;
    };

    // Where table16 is true, lookup16(table, idx) picks one of 16 floats by the low four bits of
    // each lane of idx, and iota() is 0 .. 15; otherwise blocks convert their codes.
    { V::table16 } -> std::convertible_to<bool>;
    requires !V::table16 || requires {
        { V::lookup16(a, i) } -> std::same_as<typename V::vec>;
        { V::iota() } -> std::same_as<typename V::vec>;
    };
};

} // namespace pi::cpu::simd
