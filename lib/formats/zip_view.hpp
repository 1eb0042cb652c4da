#pragma once
// A read-only view of a ZIP archive in memory (a mapped file), enough for torch.save files:
// stored (uncompressed) members, ZIP64 end records, no encryption, one disk. The directory is
// checked when the view is made; a member's local header and data only when it is asked for,
// so that a reader can name the tensor whose data is missing. Problems are pi::error(format or
// unsupported) starting with `source`. docs/converter.md describes the layout.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pi::formats {

struct zip_entry {
    std::string name;
    uint16_t method = 0; // 0 = stored
    uint32_t crc32 = 0;
    uint64_t size = 0; // uncompressed bytes
    uint64_t stored_size = 0;
    uint64_t local_header = 0;
};

// Whether `bytes` ends with a ZIP end-of-central-directory record (what Python's
// zipfile.is_zipfile asks): false for a pickle of the legacy torch format.
bool looks_like_zip(std::span<const uint8_t> bytes) noexcept;

class zip_view {
  public:
    zip_view(std::span<const uint8_t> bytes, std::string source);

    const std::vector<zip_entry>& entries() const noexcept { return entries_; }
    const zip_entry* find(std::string_view name) const noexcept;

    // Where the member's data starts, from its local header (which has its own extra field:
    // torch pads there so that data is 64-byte aligned). The data itself is not checked.
    uint64_t data_offset(const zip_entry& e) const;
    // The whole data of a stored member, its CRC-32 verified; unsupported for a compressed one.
    std::span<const uint8_t> read(const zip_entry& e) const;

  private:
    std::span<const uint8_t> bytes_;
    std::string source_;
    std::vector<zip_entry> entries_;
};

} // namespace pi::formats
