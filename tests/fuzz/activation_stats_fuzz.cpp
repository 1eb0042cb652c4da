// The activation-statistics readers on arbitrary bytes (docs/planner.md). The input is written
// once as activation_0.pt in a folder of its own and read three ways: as PowerInfer's folder
// (the torch.save zip and pickle reader), as our GGUF file, and as a torch state dict (the same
// zip and pickle reader's other entry, which the converter uses for predictor checkpoints).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "formats/torch_checkpoint.hpp"
#include "fuzz_outcome.hpp"
#include "fuzz_scratch.hpp"
#include "planner/activation_stats.hpp"
#include "support/error.hpp"

namespace {

// The folder holds activation_0.pt and nothing else, so the folder reader sees a one-layer model.
const std::string& activation_dir() {
    static const std::string dir = [] {
        const std::string d = pi::fuzz::scratch_dir() + "/activations";
        std::filesystem::create_directory(d);
        return d;
    }();
    return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& dir = activation_dir();
    const std::string path = pi::fuzz::write_input("activations/activation_0.pt", data, size);
    // Accepted: one of the three readers took it.
    bool read = false;
    try {
        (void)pi::planner::load_activation_stats(dir);
        read = true;
    } catch (const pi::error&) {
    }
    try {
        (void)pi::planner::load_activation_stats(path);
        read = true;
    } catch (const pi::error&) {
    }
    try {
        (void)pi::formats::read_torch_checkpoint(std::span(data, size), "input.pt");
        read = true;
    } catch (const pi::error&) {
    }
    if (read) pi::fuzz::note_accepted();
    return 0;
}
