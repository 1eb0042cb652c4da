// formats::read_file: a whole file read into memory, for callers that must not map it.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "formats/read_file.hpp"
#include "support/error.hpp"
#include "support/test_support.hpp"

using namespace pi;

namespace {

std::string write(const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return path;
}

} // namespace

TEST_CASE("read_file holds the file's bytes, aligned, and reports its progress") {
    const std::string dir = test::scratch_dir("read_file");
    const std::string path = write(dir + "/a.bin", "hello, file");
    std::vector<float> seen;
    formats::read_progress progress;
    progress.fn = [](float f, void* u) {
        static_cast<std::vector<float>*>(u)->push_back(f);
        return true;
    };
    progress.user_data = &seen;
    const formats::file_contents c = formats::read_file(path, progress);
    CHECK(std::string(c.bytes().begin(), c.bytes().end()) == "hello, file");
    CHECK(reinterpret_cast<uintptr_t>(c.data.get()) % large_buffer_alignment == 0);
    CHECK(seen == std::vector<float>{1.0f});
    // Changing the file afterwards does not reach the copy.
    write(path, "changed");
    CHECK(std::string(c.bytes().begin(), c.bytes().end()) == "hello, file");
    CHECK(formats::read_file(write(dir + "/empty.bin", "")).size == 0);
}

TEST_CASE("read_file errors name the file: missing, a folder, cancelled, shrinking") {
    const std::string dir = test::scratch_dir("read_file_errors");
    CHECK(test::code_of([&] { formats::read_file(dir + "/missing"); }) == status::io);
    CHECK(test::message_of([&] {
              formats::read_file(dir + "/missing");
          }).find(dir + "/missing: cannot open") != std::string::npos);
    CHECK(test::message_of([&] { formats::read_file(dir); }).find("is not a regular file") !=
          std::string::npos);

    const std::string path = write(dir + "/b.bin", "bytes");
    formats::read_progress no;
    no.fn = [](float, void*) { return false; };
    CHECK(test::code_of([&] { formats::read_file(path, no); }) == status::cancelled);

    // A file that shrinks between two chunks (64 MiB each): a sparse 65 MiB file, cut to 1 byte
    // when the first chunk has been read.
    const std::string big = dir + "/sparse.bin";
    const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t{65} << 20) == 0);
    ::close(fd);
    formats::read_progress cut;
    cut.fn = [](float, void* u) {
        REQUIRE(::truncate(static_cast<const std::string*>(u)->c_str(), 1) == 0);
        return true;
    };
    cut.user_data = const_cast<std::string*>(&big);
    const std::string msg = test::message_of([&] { formats::read_file(big, cut); });
    CHECK(msg.find(big + ": the file shrank from 68157440 to 67108864 bytes while being read") !=
          std::string::npos);
    CHECK(test::code_of([&] { formats::read_file(big); }) == status::ok); // now 1 byte
}
