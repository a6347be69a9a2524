#include "util/process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "util/error.hpp"

namespace altgrad::host {

int spawn_process(const std::vector<std::string>& argv, int output_fd, bool die_with_parent, int keep_fd,
                  bool own_group) {
    if (argv.empty()) throw error("spawn: no program");
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // The child reports a failed exec through this pipe (closed by a successful one).
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) throw error(argv[0] + ": cannot start: " + std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int e = errno;
        ::close(report[0]);
        ::close(report[1]);
        throw error(argv[0] + ": cannot start: " + std::strerror(e));
    }
    if (pid == 0) {
        ::close(report[0]);
        if (own_group) ::setpgid(0, 0);
        if (die_with_parent) {
            ::prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (::getppid() != parent) ::_exit(127);  // the parent is already gone
        }
        if (keep_fd >= 0) ::fcntl(keep_fd, F_SETFD, 0);
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        const int in = ::open("/dev/null", O_RDONLY);
        if (in >= 0) ::dup2(in, 0);
        if (output_fd >= 0) {
            ::dup2(output_fd, 1);
            ::dup2(output_fd, 2);
        }
        ::execvp(args[0], args.data());
        const int e = errno;
        (void)!::write(report[1], &e, sizeof e);
        ::_exit(127);
    }
    ::close(report[1]);
    if (own_group) ::setpgid(pid, pid);  // as the child does: whichever runs first (EACCES after its exec)
    int e = 0;
    ssize_t n;
    while ((n = ::read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    ::close(report[0]);
    if (n == sizeof e) {
        int status;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        throw error(argv[0] + ": cannot run: " + std::strerror(e));
    }
    return pid;
}

int exit_code(int wait_status) {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return 127;
}

}  // namespace altgrad::host
