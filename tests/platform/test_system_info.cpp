// pi_system_info through the public library, as a host program calls it.
#include <doctest/doctest.h>

#include <string>

#include "powerinfer.h"

TEST_CASE("pi_system_info names the threads the CPU backend uses") {
    const std::string chosen = PI_EXPECTED_THREADING; // POWERINFER_THREADING: tbb or pool
    const std::string info = pi_system_info();
    const std::string used = chosen == "pool" ? "the library's own pool" : "oneTBB";
    const std::string other = chosen == "pool" ? "oneTBB" : "the library's own pool";
    CHECK(info.find("CPU backend: built in, threads via " + used + ";") != std::string::npos);
    CHECK(info.find(other) == std::string::npos);
}
