#pragma once
// Copies of a batch's rows of which each token uses a prefix (the predictor's neuron lists):
// consecutive used prefixes are merged into one copy when the unused bytes between them are
// few, so a prompt's lists cross in a copy or a few rather than one per token.
#include <cstddef>
#include <cstdint>
#include <span>

namespace pi {

// A copy's fixed cost on a GPU is a few microseconds of setup, about what PCIe 4.0 x16 moves in
// 64 KiB: a gap of unused bytes shorter than that is cheaper to copy along than to skip.
inline constexpr size_t row_prefix_max_gap = size_t{64} << 10;

// Row t starts at t * stride and uses its first counts[t] elements of `element` bytes. Calls
// copy(offset, bytes) once per run of merged prefixes, in order, with offsets from row 0; rows
// that use nothing are not copied unless a run spans them.
template <class Copy>
void for_each_row_prefix_copy(std::span<const int32_t> counts, size_t element, size_t stride,
                              size_t max_gap, Copy&& copy) {
    size_t start = 0, end = 0;
    bool open = false;
    for (size_t t = 0; t < counts.size(); ++t) {
        if (counts[t] <= 0) continue;
        const size_t row = t * stride, used = row + element * static_cast<size_t>(counts[t]);
        if (open && row - end <= max_gap) {
            end = used;
            continue;
        }
        if (open) copy(start, end - start);
        start = row;
        end = used;
        open = true;
    }
    if (open) copy(start, end - start);
}

} // namespace pi
