#pragma once
// Whether the library took an input whole (loaded it, parsed it, converted it), counted per
// process. The replay driver (replay_main.cpp) requires every seed to be accepted: a seed that the
// writer and the target no longer agree on then fails the test instead of quietly fuzzing only
// the rejection path.
#include <cstddef>

namespace pi::fuzz {

void note_accepted() noexcept;
size_t accepted_count() noexcept;

} // namespace pi::fuzz
