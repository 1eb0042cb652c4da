#include "support/test_support.hpp"

#include <cstdlib>
#include <filesystem>

#include <doctest/doctest.h>

namespace pi::test {

std::string data_dir() {
    if (const char* env = std::getenv("PI_TEST_DATA"); env && *env) return env;
    return PI_TEST_DATA_DIR;
}

bool require_data_file(const std::string& file) {
    const std::filesystem::path p = std::filesystem::path(data_dir()) / file;
    if (std::filesystem::exists(p)) return true;
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") {
        FAIL("shared test data missing under CI: " << p.string());
    } else {
        MESSAGE("SKIPPED: shared test data not found: " << p.string());
    }
    return false;
}

std::string scratch_dir(const std::string& name) {
    const std::filesystem::path p = std::filesystem::path(PI_TEST_BINARY_DIR) / "scratch" / name;
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p.string();
}

} // namespace pi::test
