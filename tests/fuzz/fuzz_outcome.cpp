#include "fuzz_outcome.hpp"

namespace pi::fuzz {

namespace {
size_t accepted = 0; // libFuzzer and the replay driver run one input at a time
} // namespace

void note_accepted() noexcept {
    ++accepted;
}

size_t accepted_count() noexcept {
    return accepted;
}

} // namespace pi::fuzz
