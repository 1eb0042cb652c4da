#pragma once
// A torch.save file (the zip format of torch >= 1.6): one folder of records, <archive>/data.pkl
// the pickle, <archive>/data/<key> each storage's little-endian bytes, <archive>/byteorder
// (newer versions). Opening checks the archive and reads the pickle; locate() checks one
// tensor's sizes, strides and offset against its storage and the file, without reading it.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/torch_pickle.hpp"
#include "formats/zip_view.hpp"

namespace pi::formats {

// data.pkl above this is a corrupt or hostile file (a real state dict's is a few hundred KB).
inline constexpr uint64_t default_max_pickle_bytes = uint64_t{512} << 20;

// Where a tensor's elements lie in the file.
struct torch_tensor_data {
    const torch_dtype* dtype = nullptr;
    std::vector<int64_t> shape, stride; // stride in elements
    uint64_t offset = 0;                // byte offset of the first element in the file
    uint64_t span = 0;      // elements from the first to the last one the tensor reaches, plus one
    bool contiguous = true; // C order (or at most one element): `span` elements, no gaps
};

class torch_archive {
  public:
    // pi::error(format / unsupported) starting with `source`: not a zip (the legacy torch
    // format), no single <archive>/data.pkl, a compressed, oversized or corrupt data.pkl or
    // byteorder, a big-endian file.
    torch_archive(std::span<const uint8_t> file, std::string source,
                  uint64_t max_pickle_bytes = default_max_pickle_bytes);

    std::span<const uint8_t> pickle() const noexcept { return pickle_; }

    // pi::error naming the file and t.name when the storage record is missing, compressed or of
    // the wrong size, when the view reaches outside it, or when its data lies past the end of
    // the file.
    torch_tensor_data locate(const torch_tensor_ref& t) const;

  private:
    std::span<const uint8_t> file_;
    std::string source_;
    zip_view zip_;
    std::string prefix_; // "<archive>/"
    std::span<const uint8_t> pickle_;
};

} // namespace pi::formats
