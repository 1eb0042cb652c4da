#pragma once
// Reads a 1-D tensor written by torch.save (the zip format of PyTorch >= 1.6) without Python:
// <archive>/data.pkl names the storage, <archive>/data/<key> holds its little-endian bytes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pi::planner {

// The tensor's elements converted to float (integer counts above 2^24 round). Float, Double,
// Half, BFloat16, Long, Int, Short, Char, Byte and Bool storages are understood. `source` names
// the file in errors: pi::error(format) for a malformed file, (unsupported) for a valid one
// outside the subset (compressed entries, big-endian data, other dtypes, more than one dimension).
std::vector<float> read_torch_vector(std::span<const uint8_t> file_bytes,
                                     const std::string& source);
std::vector<float> read_torch_vector(const std::string& path);

} // namespace pi::planner
