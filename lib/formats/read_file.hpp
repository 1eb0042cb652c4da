#pragma once
// A whole file read into memory: what a caller uses instead of a mapping when the file may change
// or shrink on disk while it is in use (docs/robustness.md). The bytes are a copy, so nothing the
// file goes through afterwards reaches them.
#include <cstdint>
#include <span>
#include <string>

#include "support/memory.hpp"

namespace pi::formats {

struct file_contents {
    aligned_bytes data; // large_buffer_alignment-aligned
    size_t size = 0;
    std::span<const uint8_t> bytes() const noexcept {
        return {reinterpret_cast<const uint8_t*>(data.get()), size};
    }
};

// Called after each chunk read with the fraction read so far; returning false cancels.
struct read_progress {
    bool (*fn)(float fraction, void* user_data) = nullptr;
    void* user_data = nullptr;
};

// pi::error naming `path`: io when it cannot be opened, is no regular file, cannot be read or
// shrinks while being read; out_of_memory when there is no room for it; cancelled when the
// progress callback returns false.
file_contents read_file(const std::string& path, const read_progress& progress = {});

} // namespace pi::formats
