// fuzz_replay_<target> [--seeds DIR]... [DIR | FILE]...: runs a fuzz target's
// LLVMFuzzerTestOneInput once on each file, as libFuzzer runs a single input, but without
// libFuzzer, so that the GCC and sanitizer builds of the test suite replay the committed
// regressions (tests/fuzz/regressions/<target>/) and the seeds. Every file of a --seeds folder
// must be accepted (fuzz_outcome.hpp). A folder that does not exist counts as empty: a target
// without findings has no regressions folder.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_outcome.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs_of(const fs::path& path) {
    std::vector<fs::path> files;
    if (fs::is_regular_file(path)) return {path};
    if (!fs::is_directory(path)) return files;
    for (const fs::directory_entry& e : fs::directory_iterator(path))
        if (e.is_regular_file() && !e.path().filename().string().starts_with("."))
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

// The bytes in a buffer of exactly their size, so that AddressSanitizer sees a read past the end
// of the input as libFuzzer's runs would.
bool run_one(const fs::path& file, bool& read_failed) {
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
    const auto data = std::make_unique<uint8_t[]>(size > 0 ? static_cast<size_t>(size) : 0);
    if (size < 0 || !in.seekg(0) || !in.read(reinterpret_cast<char*>(data.get()), size)) {
        std::fprintf(stderr, "replay: cannot read %s\n", file.string().c_str());
        read_failed = true;
        return false;
    }
    const size_t before = pi::fuzz::accepted_count();
    LLVMFuzzerTestOneInput(data.get(), static_cast<size_t>(size));
    return pi::fuzz::accepted_count() > before;
}

} // namespace

int main(int argc, char** argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    size_t runs = 0, failures = 0;
    for (int i = 1; i < argc; ++i) {
        const bool seeds = std::string_view(argv[i]) == "--seeds";
        if (seeds && ++i == argc) {
            std::fprintf(stderr, "usage: %s [--seeds DIR]... [DIR | FILE]...\n", argv[0]);
            return 2;
        }
        const std::vector<fs::path> files = inputs_of(argv[i]);
        if (seeds && files.empty()) {
            std::fprintf(stderr, "replay: no seeds in %s\n", argv[i]);
            ++failures;
        }
        size_t accepted = 0;
        for (const fs::path& file : files) {
            bool read_failed = false;
            const bool ok = run_one(file, read_failed);
            accepted += ok;
            failures += read_failed;
            if (seeds && !ok) {
                std::fprintf(stderr, "replay: seed %s was rejected\n", file.string().c_str());
                ++failures;
            }
        }
        runs += files.size();
        std::printf("replay: %s: %zu inputs, %zu accepted\n", argv[i], files.size(), accepted);
    }
    std::printf("replay: %zu inputs, no crash\n", runs);
    return failures == 0 ? 0 : 1;
}
