#pragma once
// Shared helpers of the C++ tests.
#include <string>

namespace pi::test {

// Folder of the shared tokenizer vectors: env PI_TEST_DATA, else the CMake cache value.
std::string data_dir();
// True when data_dir() holds `file`. When it does not: under CI=true the calling test fails,
// otherwise it is reported as skipped (doctest MESSAGE) and the caller returns.
bool require_data_file(const std::string& file);
// A fresh, empty scratch folder for the calling test, under the build tree.
std::string scratch_dir(const std::string& name);

} // namespace pi::test
