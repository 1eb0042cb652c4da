#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "platform/files.hpp"
#include "support/test_support.hpp"

namespace {

using namespace pi::platform;

void write_text(const std::string& path, const std::string& text) {
    std::FILE* f = open_file(path, "wb");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(text.data(), 1, text.size(), f) == text.size());
    REQUIRE(std::fclose(f) == 0);
}

std::string read_text(const std::string& path) {
    file_mapping m;
    std::string why;
    REQUIRE(map_read_only(path, m, why));
    std::string text(reinterpret_cast<const char*>(m.data), m.size);
    unmap(m);
    return text;
}

} // namespace

TEST_CASE("a mapping holds the whole file and its size") {
    const std::string path = pi::test::scratch_dir("platform_map") + "/data.bin";
    write_text(path, "mapped bytes");
    CHECK(read_text(path) == "mapped bytes");
}

TEST_CASE("an empty file maps to no bytes") {
    const std::string path = pi::test::scratch_dir("platform_map_empty") + "/empty.bin";
    write_text(path, "");
    file_mapping m{reinterpret_cast<const uint8_t*>("x"), 99};
    std::string why;
    REQUIRE(map_read_only(path, m, why));
    CHECK(m.data == nullptr);
    CHECK(m.size == 0);
    unmap(m);
}

TEST_CASE("mapping a missing file or a folder fails with the reason") {
    const std::string dir = pi::test::scratch_dir("platform_map_fail");
    file_mapping m;
    std::string why;
    CHECK_FALSE(map_read_only(dir + "/missing.bin", m, why));
    CHECK(why.rfind("cannot open: ", 0) == 0);
    CHECK(why.size() > std::strlen("cannot open: "));
    why.clear();
    CHECK_FALSE(map_read_only(dir, m, why));
    CHECK(why == "is not a regular file");
}

TEST_CASE("released pages of a mapping read the file again") {
    const std::string path = pi::test::scratch_dir("platform_release") + "/data.bin";
    write_text(path, std::string(3 * 4096 + 17, 'r'));
    file_mapping m;
    std::string why;
    REQUIRE(map_read_only(path, m, why));
    release_pages(m.data + 100, m.size - 200);
    CHECK(m.data[5000] == 'r');
    CHECK(m.data[m.size - 1] == 'r');
    unmap(m);
}

TEST_CASE("a UTF-8 file name outside ASCII is created, mapped, replaced and removed") {
    const std::string dir = pi::test::scratch_dir("platform_utf8");
    const std::string name = dir + "/mod\xc3\xa8le-\xe6\xa8\xa1\xe5\x9e\x8b.gguf"; // modèle-模型
    write_text(name, "utf-8");
    CHECK(read_text(name) == "utf-8");
    CHECK(std::filesystem::is_regular_file(utf8_path(name)));
    CHECK(utf8_string(utf8_path(name)) == name);
    const std::string other = dir + "/\xce\xb1.tmp"; // α.tmp
    write_text(other, "replacement");
    std::string why;
    REQUIRE(replace_file(other, name, why));
    CHECK(read_text(name) == "replacement");
    CHECK_FALSE(std::filesystem::exists(utf8_path(other)));
    CHECK(remove_file(name));
    CHECK_FALSE(std::filesystem::exists(utf8_path(name)));
    CHECK_FALSE(remove_file(name));
}

TEST_CASE("a new file is never an existing one") {
    const std::string path = pi::test::scratch_dir("platform_create") + "/new.bin";
    bool exists = true;
    std::string why;
    std::FILE* f = create_new_file(path, exists, why);
    REQUIRE(f != nullptr);
    CHECK_FALSE(exists);
    CHECK(std::fputs("first", f) >= 0);
    CHECK(sync_file(f));
    CHECK(std::fclose(f) == 0);
    CHECK(create_new_file(path, exists, why) == nullptr);
    CHECK(exists);
    CHECK_FALSE(why.empty());
    CHECK(read_text(path) == "first");
}

TEST_CASE("creating in a missing folder fails without claiming the name is taken") {
    const std::string path = pi::test::scratch_dir("platform_create_fail") + "/no/such/dir/x";
    bool exists = true;
    std::string why;
    CHECK(create_new_file(path, exists, why) == nullptr);
    CHECK_FALSE(exists);
    CHECK_FALSE(why.empty());
}

TEST_CASE("replacing from a missing file fails with the reason and keeps the target") {
    const std::string dir = pi::test::scratch_dir("platform_replace_fail");
    write_text(dir + "/target", "kept");
    std::string why;
    CHECK_FALSE(replace_file(dir + "/missing", dir + "/target", why));
    CHECK_FALSE(why.empty());
    CHECK(read_text(dir + "/target") == "kept");
    sync_folder_of(dir + "/target"); // nothing to observe; it must not fail on a real folder
}
