#pragma once
// A file written whole or not at all: the bytes go to a new temporary file beside the target,
// and commit() flushes it to stable storage and renames it into place. Destroyed uncommitted, it
// removes the temporary file, so a failed write never leaves a half-written target.
#include <cstdint>
#include <cstdio>
#include <string>

namespace pi {

class file_sink {
  public:
    // Creates the temporary file exclusively (never an existing file or a symbolic link) under a
    // name no other writer uses, with the mode the umask gives a new file; throws status::io.
    explicit file_sink(const std::string& target);
    file_sink(const file_sink&) = delete;
    file_sink& operator=(const file_sink&) = delete;
    ~file_sink();

    const std::string& path() const noexcept { return path_; }
    void bytes(const void* p, size_t n);
    // Names the part being written in write errors ("tensor 'x'").
    void set_where(std::string where) { where_ = std::move(where); }
    template <typename T> void pod(T v) { bytes(&v, sizeof v); }
    void str(const std::string& s) {
        pod<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
    // Zero bytes up to the next multiple of alignment.
    void pad(uint64_t alignment);
    // Flushes, closes and renames the temporary file to `target`; throws status::io.
    void commit(const std::string& target);

  private:
    void close();

    std::string path_;
    std::string where_;
    std::FILE* f_ = nullptr;
    uint64_t pos_ = 0;
    bool committed_ = false;
};

} // namespace pi
