#pragma once
// The dot products of M weight rows with up to NT activation rows by a group of 32 lanes, shared
// by the dense and the row-sparse kernels (M = 2: the joint up/gate product).
#include "gpu_context.hpp"

namespace pi::gpu {

// Groups (weight rows) per block of the row-per-group kernels.
inline constexpr int vec_groups = 4;
inline constexpr int vec_threads = vec_groups * group;

// Blocks of a quantized row that a group copies per step: 576 bytes of Q4_0, 1088 of Q8_0.
inline constexpr int stage_blocks = group;

// The words of one step's copy: its bytes, one word more for a row that starts 2 bytes into a
// word, and one that bytes8_in_words reads past the last and discards.
template <class W> inline constexpr int stage_words = stage_blocks* W::block_bytes / 4 + 2;

// acc[t][m] = rows[m] . xs[t] over n elements, the same value in every lane of the calling
// group. Lane l converts units l, l + 32, ... of every row once and uses them for every token,
// and each element of x once for all M rows.
//
// Quantized rows are copied a step of 32 blocks at a time into the group's part of shared
// memory, lane l loading aligned words l, l + 32, ... (range_word): a group's loads are whole
// 128-byte runs of the row, where one lane per quarter block reading its own bytes would issue
// 2-byte loads at an 18- or 34-byte stride. The lanes then convert their units from the copy,
// the same units in the same order as from the row (lane l: units l, l + 32, ..., since a
// step is 128 units), so the sums have the same bits either way. Two copies alternate, so one
// group_sync per step orders a step's copy before its reads and after the reads two steps back.
template <class W, int M, int NT>
__device__ __forceinline__ void row_dot(const unsigned char* const (&rows)[M], int64_t n,
                                        const float* const (&xs)[NT], float (&acc)[NT][M]) {
    const int lane = threadIdx.x % group;
    for (int t = 0; t < NT; ++t)
        for (int m = 0; m < M; ++m)
            acc[t][m] = 0.0f;
    if constexpr (quantized<W>) {
        static_assert(stage_blocks * W::block_bytes % 4 == 0, "steps keep a row's word offset");
        __shared__ uint32_t stage[vec_groups][2][M][stage_words<W>];
        const int g = threadIdx.x / group;
        const int64_t blocks = n / W::block;
        int lead[M]; // the offset of a row's first byte in its copy
        for (int m = 0; m < M; ++m)
            lead[m] = static_cast<int>(reinterpret_cast<std::uintptr_t>(rows[m]) % 4);
        int buf = 0;
        for (int64_t b0 = 0; b0 < blocks; b0 += stage_blocks, buf ^= 1) {
            const int nb =
                blocks - b0 < stage_blocks ? static_cast<int>(blocks - b0) : stage_blocks;
            for (int m = 0; m < M; ++m) {
                const unsigned char* begin = W::block_at(rows[m], b0);
                const unsigned char* end = begin + nb * W::block_bytes;
                const int words = range_words(begin, end);
                for (int w = lane; w < words; w += group)
                    stage[g][buf][m][w] = range_word(begin, end, w);
            }
            group_sync();
            for (int u = lane; u < nb * W::units_per_block; u += group) {
                const int blk = u / W::units_per_block;
                float v[M][W::unit];
                for (int m = 0; m < M; ++m)
                    W::unit_from_words(stage[g][buf][m], lead[m] + blk * W::block_bytes,
                                       u % W::units_per_block, v[m]);
                const int64_t e0 = b0 * W::block + static_cast<int64_t>(u) * W::unit;
                for (int t = 0; t < NT; ++t)
                    dot_units(v, xs[t] + e0, acc[t]);
            }
        }
        group_sync(); // the caller's next rows may be copied over the words read last
    } else {
        const int64_t units = n / W::unit;
        for (int64_t u = lane; u < units; u += group) {
            float v[M][W::unit];
            for (int m = 0; m < M; ++m)
                W::load_unit(rows[m], u, v[m]);
            for (int t = 0; t < NT; ++t)
                dot_units(v, xs[t] + u * W::unit, acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t)
        for (int m = 0; m < M; ++m)
            acc[t][m] = group_sum(acc[t][m]);
}

// x and y fit a product with w: x F32 [cols][n_tok], y F32 [rows][n_tok].
bool product_shaped(const view& w, const view& x, const view& y);

} // namespace pi::gpu
