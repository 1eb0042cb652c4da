#pragma once
// The fault-injection tests' view of every allocation the library makes: this program replaces
// the global operator new and delete (alloc_counter.cpp), which covers the standard containers
// and the small buffers of platform/buffers.hpp, and installs the library's fault hook, which
// covers the file mappings and the page-backed large buffers. Each allocation is counted, live
// and peak bytes are tracked (the page-backed ones from the library's own tally), and an armed
// plan fails the Nth allocation (docs/robustness.md).
#include <cstddef>
#include <cstdint>

namespace pi::faults {

// Fail the nth allocation from now (1-based), and with `persistent` every one after it too, until
// disarm(). A plan applies to every thread.
void arm(uint64_t nth, bool persistent = false);
// Stops failing; returns how many allocations were failed since arm().
uint64_t disarm();
// Allocations counted since the last arm() (or reset_count()).
uint64_t allocations();
void reset_count();

// Bytes the program holds through operator new and in page-backed buffers, and (an upper bound
// of) the most it held since reset_peak().
int64_t live_bytes();
int64_t peak_bytes();
void reset_peak();

// Installs the library's alloc_fault_hook (platform/buffers.hpp) so that mappings and page-backed
// buffers count as allocations too (fault_fixture.cpp does it before any test loads a file).
void install_library_hook();

} // namespace pi::faults
