#include "fuzz_scratch.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace pi::fuzz {

namespace {

std::string make_scratch_dir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/pi-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
        std::perror("pi-fuzz: mkdtemp");
        std::abort();
    }
    return pattern;
}

// Removes the folder when the process exits normally (libFuzzer's -runs and -max_total_time end
// through exit()); a crashed run leaves it behind for inspection.
struct scratch_folder {
    std::string path = make_scratch_dir();
    ~scratch_folder() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

} // namespace

const std::string& scratch_dir() {
    static const scratch_folder folder;
    return folder.path;
}

std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
    const std::string path = scratch_dir() + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    // A scratch file that cannot be written is the machine's fault, not the input's: stop loudly
    // instead of fuzzing the reader's "file not found" path.
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
        std::perror(("pi-fuzz: " + path).c_str());
        std::abort();
    }
    return path;
}

} // namespace pi::fuzz
