#pragma once
// A 1-D tensor written by torch.save(tensor), read without Python: PowerInfer's activation
// counts (docs/planner.md).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pi::formats {

// The tensor's elements converted to float (integer counts above 2^24 round). Float, Double,
// Half, BFloat16, Long, Int, Short, Char, Byte and Bool storages are understood. `source` names
// the file in errors: pi::error(format) for a malformed file, (unsupported) for a valid one
// outside the subset (compressed records, big-endian data, other dtypes, more than one dimension).
std::vector<float> read_torch_vector(std::span<const uint8_t> file_bytes,
                                     const std::string& source);
std::vector<float> read_torch_vector(const std::string& path);

} // namespace pi::formats
