#pragma once
// The library's readers take paths (they mmap the file), so each fuzz input is written to a file
// in a folder of this process first. The folder is created once and removed at exit.
#include <cstddef>
#include <cstdint>
#include <string>

namespace pi::fuzz {

// A folder of this process under $TMPDIR, or /dev/shm (a tmpfs) where it can be written, or /tmp.
const std::string& scratch_dir();

// Writes the input to scratch_dir()/name, replacing what was there; returns the path.
std::string write_input(const std::string& name, const uint8_t* data, size_t size);

} // namespace pi::fuzz
