#pragma once
// The disk faults of the tests, made without privileges the tests may lack: a full disk is a
// file size limit (RLIMIT_FSIZE with SIGXFSZ ignored, so that a write past it fails with EFBIG
// as one on a full disk fails with ENOSPC), an unwritable folder is one the tests' process
// cannot write (as root, a child that has dropped to an unprivileged user, since root ignores
// permissions).
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include <sys/resource.h>

namespace pi::faults {

// Lowers this process's file size limit to `bytes` while it lives.
class file_size_limit {
  public:
    explicit file_size_limit(rlim_t bytes);
    ~file_size_limit();
    file_size_limit(const file_size_limit&) = delete;
    file_size_limit& operator=(const file_size_limit&) = delete;

  private:
    rlimit saved_{};
    struct sigaction saved_action_ {};
};

// Runs `child` in a forked process that cannot write `folder` (made 0555; as root the child
// also drops to user and group 65534), and returns its exit status: what `child` returned
// (0..125), or 126 when the child could not drop its privileges. The child ends with _exit and
// runs no doctest assertion. The folder's mode is restored afterwards.
int run_without_write_access(const std::string& folder, const std::function<int()>& child);

// Runs a program with the given arguments (argv[0] included), a file size limit (0: none) and
// returns its exit status (-signal when a signal ended it); its stderr goes to `err`.
int run_program(const std::vector<std::string>& argv, rlim_t file_size_limit, std::string& err);

} // namespace pi::faults
