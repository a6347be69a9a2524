#include "conformance/isolate.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

namespace altgrad::host::conformance {

const char* outcome_name(outcome o) {
    switch (o) {
        case outcome::passed: return "passed";
        case outcome::failed: return "failed";
        case outcome::skipped: return "skipped";
        case outcome::warning: return "warning";
        case outcome::crashed: return "crashed";
        case outcome::timed_out: return "timed out";
    }
    return "unknown";
}

namespace {

// Wire format: status byte, then four length-prefixed strings.
std::string encode(const result& r) {
    std::string out(1, static_cast<char>(r.status));
    for (const std::string* s : {&r.reason, &r.input, &r.hint}) {
        const uint32_t n = static_cast<uint32_t>(s->size());
        out.append(reinterpret_cast<const char*>(&n), sizeof n);
        out += *s;
    }
    return out;
}

bool decode(const std::string& in, result& r) {
    if (in.empty()) return false;
    r.status = static_cast<outcome>(in[0]);
    size_t pos = 1;
    for (std::string* s : {&r.reason, &r.input, &r.hint}) {
        uint32_t n = 0;
        if (pos + sizeof n > in.size()) return false;
        std::memcpy(&n, in.data() + pos, sizeof n);
        pos += sizeof n;
        if (pos + n > in.size()) return false;
        s->assign(in, pos, n);
        pos += n;
    }
    return true;
}

void write_all(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
        const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        if (n <= 0) return;
        done += static_cast<size_t>(n);
    }
}

}  // namespace

result run_isolated(const std::string& check, double timeout_seconds, const std::function<result()>& body) {
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    result r;
    r.check = check;
    int fds[2];
    if (::pipe(fds) != 0) {
        r.status = outcome::crashed;
        r.reason = "could not create a pipe for the child process";
        return r;
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        r.status = outcome::crashed;
        r.reason = "could not fork a child process";
        return r;
    }
    if (pid == 0) {
        ::close(fds[0]);
        result child;
        try {
            child = body();
        } catch (const std::exception& e) {
            child.status = outcome::failed;
            child.reason = e.what();
        } catch (...) {
            child.status = outcome::failed;
            child.reason = "unknown exception";
        }
        write_all(fds[1], encode(child));
        ::close(fds[1]);
        std::fflush(nullptr);
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string received;
    bool timed_out = false;
    for (;;) {
        const double left = timeout_seconds - elapsed();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;  // loop re-checks the clock
        char buf[4096];
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n <= 0) break;  // EOF: the child closed its end (done or died)
        received.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (timed_out) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.seconds = elapsed();
    if (timed_out) {
        r.status = outcome::timed_out;
        r.reason = "still running after " + std::to_string(static_cast<int>(timeout_seconds)) + " s; killed";
        r.hint = "a quantize/encode/decode call may loop forever on some input";
        return r;
    }
    if (WIFSIGNALED(status)) {
        r.status = outcome::crashed;
        r.reason = std::string("the plugin killed the process with signal ") + std::to_string(WTERMSIG(status)) +
                   " (" + ::strsignal(WTERMSIG(status)) + ")";
        r.hint = "run the check under gdb: altgrad-host conformance --only " + check + " with a debugger attached";
        return r;
    }
    if (!decode(received, r)) {
        r.status = outcome::crashed;
        r.reason = "the check's process exited (status " + std::to_string(WEXITSTATUS(status)) +
                   ") without reporting a result";
        r.hint = "the plugin may call exit() or abort()";
        return r;
    }
    r.check = check;
    r.seconds = elapsed();
    return r;
}

}  // namespace altgrad::host::conformance
