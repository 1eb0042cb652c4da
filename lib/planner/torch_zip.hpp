#pragma once
// A read-only view of a ZIP archive held in memory, enough for torch.save files: stored
// (uncompressed) entries, ZIP64 end records, no encryption, one disk. Every offset and length is
// checked against the buffer; problems are pi::error(format or unsupported) naming `source`.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pi::planner {

struct zip_entry {
    std::string name;
    uint16_t method = 0; // 0 = stored
    uint64_t size = 0;   // uncompressed bytes
    uint64_t data_offset = 0;
};

class zip_view {
  public:
    zip_view(std::span<const uint8_t> bytes, std::string source);

    const std::vector<zip_entry>& entries() const noexcept { return entries_; }
    const zip_entry* find(std::string_view name) const noexcept;
    // The bytes of a stored entry; pi::error(unsupported) for a compressed one.
    std::span<const uint8_t> data(const zip_entry& e) const;

  private:
    std::span<const uint8_t> bytes_;
    std::string source_;
    std::vector<zip_entry> entries_;
};

} // namespace pi::planner
