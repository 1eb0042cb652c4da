// Every fuzz target links this: the library logs a warning for many rejected files, and thousands
// of them a second would bury libFuzzer's own output and slow the run.
#include <cstdint>

#include "support/log.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    pi::set_log_sink([](pi::log_level, const char*, void*) {}, nullptr);
    return 0;
}
