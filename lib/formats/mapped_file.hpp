#pragma once
// A whole file mapped read-only. Only the pages a reader touches are brought into memory, so a
// multi-gigabyte checkpoint costs what its headers and pickle cost.
#include <cstdint>
#include <span>
#include <string>

namespace pi::formats {

class mapped_file {
  public:
    // pi::error(io) naming `path` when it cannot be opened or mapped, out_of_memory when the
    // system has no room for the mapping (or the fault hook of platform/buffers.hpp says so).
    explicit mapped_file(const std::string& path);
    ~mapped_file();
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    std::span<const uint8_t> bytes() const noexcept { return {data_, size_}; }

  private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

} // namespace pi::formats
