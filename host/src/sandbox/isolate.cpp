#include "sandbox/isolate.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "sandbox/guarded_memory.hpp"
#include "util/name_table.hpp"

namespace altgrad::host::sandbox {

const name_table<outcome>& outcome_names() {
    static const name_table<outcome> t{{outcome::passed, "passed"},   {outcome::failed, "failed"},
                                       {outcome::skipped, "skipped"}, {outcome::warning, "warning"},
                                       {outcome::crashed, "crashed"}, {outcome::timed_out, "timed out"}};
    return t;
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

// Memory the child writes its crash note into and the parent reads.
class shared_note {
public:
    shared_note() {
        void* p =
            ::mmap(nullptr, sizeof(crash_note), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        note_ = p == MAP_FAILED ? nullptr : static_cast<crash_note*>(p);
        if (note_ != nullptr) std::memset(note_, 0, sizeof *note_);
    }
    ~shared_note() {
        if (note_ != nullptr) ::munmap(note_, sizeof *note_);
    }
    shared_note(const shared_note&) = delete;
    shared_note& operator=(const shared_note&) = delete;
    crash_note* get() const { return note_; }
    // The call in progress when the child stopped, as " during CALL", or "".
    std::string during() const {
        if (note_ == nullptr || note_->call[0] == '\0') return "";
        return std::string(" during ") + std::string(note_->call, strnlen(note_->call, sizeof note_->call));
    }

private:
    crash_note* note_ = nullptr;
};

// The reason a child killed by `signal` gives, naming the call and, when the
// fault hit a guard page or a read-only input, the buffer and element.
void describe_signal(const crash_note* note, int signal, result& r) {
    const std::string killed = "signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
    if (note == nullptr || note->where == fault_none || note->call[0] == '\0') return;
    const std::string call(note->call, strnlen(note->call, sizeof note->call));
    const std::string buffer = std::string(note->buffer, strnlen(note->buffer, sizeof note->buffer)) +
                               " buffer of " + std::to_string(note->count) + " elements";
    const std::string element = std::to_string(note->element);
    switch (note->where) {
        case fault_after_end:
            r.reason = call + " touched element " + element + " of its " + buffer +
                       ", past the end (a guard page): the process died with " + killed;
            r.hint = "read and write only elements 0 .. count-1 of each buffer";
            break;
        case fault_before_start:
            r.reason = call + " touched " + element + " element(s) before element 0 of its " + buffer +
                       " (a guard page): the process died with " + killed;
            r.hint = "read and write only elements 0 .. count-1 of each buffer";
            break;
        case fault_read_only:
            r.reason = call + " wrote element " + element + " of its " + buffer +
                       ", which is read-only (an input): the process died with " + killed;
            r.hint = "never write into an input buffer";
            break;
        default: break;
    }
}

class stopwatch {
public:
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

result crashed(const std::string& check, const std::string& reason) {
    result r;
    r.check = check;
    r.status = outcome::crashed;
    r.reason = reason;
    return r;
}

// In the child: runs the check, sends its result up the pipe and exits
// without the parent's atexit handlers (an exception is the check's failure).
[[noreturn]] void run_child(int result_fd, crash_note* note, const std::function<result()>& body) {
    report_faults_to(note);
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
    write_all(result_fd, encode(child));
    ::close(result_fd);
    std::fflush(nullptr);
    ::_exit(0);
}

// Reads what the child sends until it closes the pipe (done or died): true;
// false when `timeout_seconds` on `clock` pass first.
bool receive_until_closed(int fd, const stopwatch& clock, double timeout_seconds, std::string& received) {
    for (;;) {
        const double left = timeout_seconds - clock.seconds();
        if (left <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
        if (ready <= 0) continue;  // EINTR or nothing yet: the loop re-checks the clock
        char buf[4096];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) return true;
        received.append(buf, static_cast<size_t>(n));
    }
}

int wait_status(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return status;
}

// Why a child that finished in time gave no result: a signal, or an exit
// without one (exit() or abort() in the plugin). False when it gave one.
bool no_result(int status, const std::string& received, const shared_note& note, result& r) {
    if (WIFSIGNALED(status)) {
        r.status = outcome::crashed;
        r.reason = std::string("the plugin killed the process with signal ") +
                   std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")" +
                   note.during();
        r.hint = "run the check under gdb: altgrad-host conformance --only " + r.check +
                 " with a debugger attached";
        describe_signal(note.get(), WTERMSIG(status), r);
        return true;
    }
    if (!decode(received, r)) {
        r.status = outcome::crashed;
        r.reason = "the check's process exited (status " + std::to_string(WEXITSTATUS(status)) +
                   ") without reporting a result" + note.during();
        r.hint = "the plugin may call exit() or abort()";
        return true;
    }
    return false;
}

}  // namespace

result run_isolated(const std::string& check, double timeout_seconds, const std::function<result()>& body) {
    const stopwatch clock;
    int fds[2];
    if (::pipe(fds) != 0) return crashed(check, "could not create a pipe for the child process");
    const shared_note note;
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return crashed(check, "could not fork a child process");
    }
    if (pid == 0) {
        ::close(fds[0]);
        run_child(fds[1], note.get(), body);
    }
    ::close(fds[1]);
    std::string received;
    const bool in_time = receive_until_closed(fds[0], clock, timeout_seconds, received);
    ::close(fds[0]);
    if (!in_time) ::kill(pid, SIGKILL);
    const int status = wait_status(pid);

    result r;
    r.check = check;
    r.seconds = clock.seconds();
    if (!in_time) {
        r.status = outcome::timed_out;
        r.reason = "still running after " + std::to_string(static_cast<int>(timeout_seconds)) + " s" +
                   note.during() + "; killed";
        r.hint = "a quantize/encode/decode call may loop forever on some input";
        return r;
    }
    if (no_result(status, received, note, r)) return r;
    r.check = check;  // the child's result, under the name the kit asked for
    r.seconds = clock.seconds();
    return r;
}

}  // namespace altgrad::host::sandbox
