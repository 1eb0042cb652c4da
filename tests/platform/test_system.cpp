#include <doctest/doctest.h>

#include <thread>

#include "platform/console.h"
#include "platform/system.hpp"

using namespace pi::platform;

TEST_CASE("machine facts are plausible") {
    const std::size_t page = page_size();
    CHECK(page >= 4096);
    CHECK((page & (page - 1)) == 0);
    CHECK(logical_cpus() >= 1);
    CHECK(process_id() > 0);
    // 0 means the OS does not say; otherwise what is available fits in what is installed.
    if (physical_ram() != 0 && available_ram() != 0) CHECK(available_ram() <= physical_ram());
    CHECK_FALSE(cpu_model_name().empty());
    CHECK(peak_rss_bytes() > 0);
}

TEST_CASE("the monotonic clock never goes back and advances") {
    const double start = platform_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double later = platform_seconds();
    CHECK(later >= start + 0.015);
}

TEST_CASE("a file's size, and -1 for a missing one") {
    FILE* f = platform_fopen("platform_size.bin", "wb");
    REQUIRE(f != nullptr);
    std::fputs("12345", f);
    std::fclose(f);
    CHECK(platform_file_size("platform_size.bin") == 5);
    CHECK(platform_file_size("platform_no_such_file.bin") == -1);
    std::remove("platform_size.bin");
}

TEST_CASE("lines are read whole, long ones included, and the end of input is -1") {
    FILE* f = std::tmpfile();
    REQUIRE(f != nullptr);
    const std::string long_line(1000, 'x');
    std::fputs(("short\n" + long_line + "\nlast").c_str(), f);
    std::rewind(f);
    char* line = nullptr;
    size_t capacity = 0;
    CHECK(platform_read_line(&line, &capacity, f) == 6);
    CHECK(std::string(line) == "short\n");
    CHECK(platform_read_line(&line, &capacity, f) == 1001);
    CHECK(std::string(line) == long_line + "\n");
    CHECK(platform_read_line(&line, &capacity, f) == 4);
    CHECK(std::string(line) == "last");
    CHECK(platform_read_line(&line, &capacity, f) == -1);
    std::free(line);
    std::fclose(f);
}

TEST_CASE("a file is not a terminal") {
    FILE* f = std::tmpfile();
    REQUIRE(f != nullptr);
    CHECK(platform_is_terminal(f) == 0);
    CHECK(platform_is_terminal(nullptr) == 0);
    std::fclose(f);
}

TEST_CASE("AArch64 extensions are reported only on AArch64") {
    const arm_extensions e = arm_cpu_extensions();
#if defined(__aarch64__) || defined(_M_ARM64)
    static_cast<void>(e); // any answer: it is the CPU's (qemu -cpu max has both)
#else
    CHECK_FALSE(e.dotprod);
    CHECK_FALSE(e.fp16);
#endif
}
