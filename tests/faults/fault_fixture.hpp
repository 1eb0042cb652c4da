#pragma once
// What the fault-injection tests share: a tiny model small enough that every allocation of its
// load can be failed in turn, the loop that does it, and helpers for the files they leave.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "powerinfer.h"

namespace pi::faults {

// A 320-token cut of the fixture's SentencePiece vocabulary (its byte tokens and first merges).
const std::string& tiny_vocab_path();
// A sparse llama model over that vocabulary: n_embd 32, 2 layers, 2 query heads and 1 KV head,
// n_ff 64, predictor rank 32, F16 weights (so that every weight quantizes), written once per
// process.
const std::string& tiny_model_path();

// An empty scratch folder on a memory file system (/dev/shm) where there is one, else under the
// build tree: the loops that write files create and remove thousands of them, which costs a disk
// far more than the work itself.
std::string memory_scratch_dir(const std::string& name);

// The folder's file names, sorted (to see that a failed write left nothing behind).
std::vector<std::string> folder_listing(const std::string& dir);
std::vector<uint8_t> file_bytes(const std::string& path);
bool file_exists(const std::string& path);

// Sets pi_last_error's per-thread buffer to a message longer than any the loops produce, so that
// its capacity stays put and the loops' byte tallies compare exactly.
void widen_error_buffer();

struct loop_stats {
    uint64_t runs = 0;               // runs with an allocation failed
    uint64_t absorbed = 0;           // of those, runs that still succeeded (checked by `after`)
    uint64_t allocations = 0;        // allocations of the run that succeeded
    std::vector<pi_status> statuses; // distinct failure statuses seen
    std::vector<bool> found;         // per fault_case::expected_messages: seen in some failure
};

// One operation of a fault loop: `setup` runs unarmed before each call (may be empty), `call` is
// the operation whose allocations fail, `after(status, faulted)` runs unarmed after it: it checks
// what the call left and frees everything setup and call made.
struct fault_case {
    std::function<void()> setup;
    std::function<pi_status()> call;
    std::function<void(pi_status, bool)> after;
    std::vector<pi_status> also_allowed; // failure statuses accepted besides OUT_OF_MEMORY
    // Texts some failure's message must contain when one allocation fails at a time: the
    // allocation paths the case must reach.
    std::vector<const char*> expected_messages;
    // Fail allocation 1, 1 + stride, 1 + 2 stride, ...: 1 (every one) unless a case's run is so
    // long that failing each allocation in turn would outlast the suite's time (docs/robustness.md).
    uint64_t stride = 1;
};

// Runs the case with the Nth allocation of `call` failing (and with `persistent`, every one after
// it) for N = 1, 1 + stride, ... until a run fails none: that run must return PI_OK. A run whose failed
// allocation was absorbed may succeed (`after` checks its result as any other); every other
// must return PI_ERR_OUT_OF_MEMORY (or an also_allowed status) with a message. After `after` the
// program must hold exactly the bytes it held before `setup` (no leak, nothing half-built).
// Log messages are counted, not printed, meanwhile.
loop_stats for_every_allocation(const char* what, const fault_case& c, bool persistent = false);

// for_every_allocation with one failure, then with every allocation from the Nth on failing;
// each pass's numbers go to the test's output. Returns the first pass's.
loop_stats for_both_plans(const char* what, const fault_case& c);

// Log messages at warn and above, collected while `collecting` is set (tests that inspect them)
// and only counted otherwise (the loops, whose byte tallies a growing list would upset).
struct log_capture {
    log_capture();
    ~log_capture();
    std::vector<std::string> warnings;
    bool collecting = true;
    int count = 0;
    bool any_containing(const std::string& needle) const;
};

} // namespace pi::faults
