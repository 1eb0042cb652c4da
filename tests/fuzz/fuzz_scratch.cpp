#include "fuzz_scratch.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <system_error>
#include <unistd.h>

namespace pi::fuzz {

namespace {

// $TMPDIR when set; otherwise /dev/shm, since writing each input to a disk-backed /tmp takes most
// of a file-based target's time (gguf_fuzz runs 2-3 times faster on tmpfs, docs/fuzzing.md).
std::string scratch_parent() {
    const char* tmp = std::getenv("TMPDIR");
    if (tmp && *tmp) return tmp;
    std::error_code ignored;
    if (std::filesystem::is_directory("/dev/shm", ignored) && access("/dev/shm", W_OK) == 0)
        return "/dev/shm";
    return std::filesystem::temp_directory_path(ignored).string();
}

// A new folder of this process's own (create_directory fails on a name taken), like mkdtemp,
// which Windows lacks.
std::string make_scratch_dir() {
    const std::string parent = scratch_parent();
    std::mt19937_64 names{std::random_device{}()};
    for (int attempt = 0; attempt < 100; ++attempt) {
        const std::string path = parent + "/pi-fuzz-" + std::to_string(names() % 1000000000000u);
        std::error_code error;
        if (std::filesystem::create_directory(path, error)) return path;
        if (error) {
            std::fprintf(stderr, "pi-fuzz: cannot make %s: %s\n", path.c_str(),
                         error.message().c_str());
            std::abort();
        }
    }
    std::fprintf(stderr, "pi-fuzz: no free folder name under %s\n", parent.c_str());
    std::abort();
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
