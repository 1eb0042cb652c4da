#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "platform/files.hpp"
#include "platform/library.hpp"
#include "support/test_support.hpp"

using namespace pi::platform;

TEST_CASE("module file names follow the OS") {
#if defined(_WIN32)
    CHECK(library_file_name("powerinfer-cuda") == "powerinfer-cuda.dll");
    CHECK(path_list_separator() == ';');
#elif defined(__APPLE__)
    CHECK(library_file_name("powerinfer-cuda") == "libpowerinfer-cuda.dylib");
    CHECK(path_list_separator() == ':');
#else
    CHECK(library_file_name("powerinfer-cuda") == "libpowerinfer-cuda.so");
    CHECK(path_list_separator() == ':');
#endif
}

TEST_CASE("opening a missing or malformed library fails with the OS's reason") {
    const std::string dir = pi::test::scratch_dir("platform_library");
    std::string why;
    CHECK(library_open(dir + "/" + library_file_name("missing"), why) == nullptr);
    CHECK_FALSE(why.empty());
    const std::string junk = dir + "/" + library_file_name("junk");
    std::FILE* f = open_file(junk, "wb");
    REQUIRE(f != nullptr);
    std::fputs("not a shared library", f);
    std::fclose(f);
    why.clear();
    CHECK(library_open(junk, why) == nullptr);
    CHECK_FALSE(why.empty());
    library_close(nullptr); // a null handle is ignored
}

TEST_CASE("the binary holding this code is this test program") {
    static const int here = 0;
    const std::string path = binary_path_of(&here);
    REQUIRE_FALSE(path.empty());
    CHECK(utf8_path(path).stem().string().find("test_platform") != std::string::npos);
    CHECK(std::filesystem::is_regular_file(utf8_path(path)));
}
