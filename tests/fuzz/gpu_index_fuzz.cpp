// The GPU index reader on arbitrary bytes (docs/planner.md): read_gpu_index, which may throw
// pi::error, and load_gpu_index, which must never throw for a bad file, once with a geometry the
// file does not claim and once with the one it does, so the acceptance checks run too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_outcome.hpp"
#include "fuzz_scratch.hpp"
#include "planner/gpu_index.hpp"
#include "support/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = pi::fuzz::write_input("model.generated.gpuidx", data, size);
    (void)pi::planner::load_gpu_index(path, "", 2, 176, 1u << 30);
    try {
        const pi::planner::gpu_index index = pi::planner::read_gpu_index(path);
        const int32_t n_ff = index.n_ff.empty() ? 0 : index.n_ff.front();
        (void)pi::planner::load_gpu_index(path, index.fingerprint,
                                          static_cast<int32_t>(index.hot.size()), n_ff,
                                          index.budget.value_or(index.vram_capacity));
        pi::fuzz::note_accepted();
    } catch (const pi::error&) {
    }
    return 0;
}
