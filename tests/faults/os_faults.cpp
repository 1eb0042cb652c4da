#include "os_faults.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(POWERINFER_THREADING_POOL)
#include <oneapi/tbb/global_control.h>

namespace {
// fork() copies the calling thread only. A child of run_without_write_access runs the library's
// loops (a quantization, a load and a token): had one of oneTBB's workers held the scheduler's
// lock at the fork, the child would wait for it forever (a 900 s CTest timeout, seen once under
// load). With one thread allowed, oneTBB starts no workers in this program, so there is nothing
// to inherit. The loops' results are the same at any thread count (platform/parallel.hpp).
const tbb::global_control no_workers(tbb::global_control::max_allowed_parallelism, 1);
} // namespace
#endif

namespace pi::faults {

namespace {

int exit_status(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return -1;
}

} // namespace

file_size_limit::file_size_limit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit lower = saved_;
    lower.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lower);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGXFSZ, &ignore, &saved_action_);
}

file_size_limit::~file_size_limit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    sigaction(SIGXFSZ, &saved_action_, nullptr);
}

int run_without_write_access(const std::string& folder, const std::function<int()>& child) {
    struct stat st {};
    stat(folder.c_str(), &st);
    chmod(folder.c_str(), 0555);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(126);
        _exit(child());
    }
    const int status = exit_status(pid);
    chmod(folder.c_str(), st.st_mode & 07777);
    return status;
}

int run_program(const std::vector<std::string>& argv, rlim_t limit, std::string& err) {
    char err_path[] = "/tmp/pi_faults_stderr_XXXXXX";
    const int err_fd = mkstemp(err_path);
    std::vector<char*> args;
    for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(err_fd, STDERR_FILENO);
        if (limit != 0) {
            rlimit r{};
            getrlimit(RLIMIT_FSIZE, &r);
            r.rlim_cur = limit;
            setrlimit(RLIMIT_FSIZE, &r);
            std::signal(SIGXFSZ, SIG_IGN); // ignored stays ignored across exec
        }
        execv(args[0], args.data());
        _exit(127);
    }
    const int status = exit_status(pid);
    err.clear();
    char buf[4096];
    lseek(err_fd, 0, SEEK_SET);
    for (ssize_t n; (n = read(err_fd, buf, sizeof buf)) > 0;)
        err.append(buf, static_cast<size_t>(n));
    close(err_fd);
    unlink(err_path);
    return status;
}

} // namespace pi::faults
