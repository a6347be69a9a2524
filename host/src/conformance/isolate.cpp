#include "conformance/isolate.hpp"

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

#include "conformance/guarded_memory.hpp"

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

// Memory the child writes its crash note into and the parent reads.
class shared_note {
public:
    shared_note() {
        void* p = ::mmap(nullptr, sizeof(crash_note), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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
    const std::string buffer = std::string(note->buffer, strnlen(note->buffer, sizeof note->buffer)) + " buffer of " +
                               std::to_string(note->count) + " elements";
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
        default:
            break;
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
    const shared_note note;
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
        report_faults_to(note.get());
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
        r.reason = "still running after " + std::to_string(static_cast<int>(timeout_seconds)) + " s" + note.during() +
                   "; killed";
        r.hint = "a quantize/encode/decode call may loop forever on some input";
        return r;
    }
    if (WIFSIGNALED(status)) {
        r.status = outcome::crashed;
        r.reason = std::string("the plugin killed the process with signal ") + std::to_string(WTERMSIG(status)) +
                   " (" + ::strsignal(WTERMSIG(status)) + ")" + note.during();
        r.hint = "run the check under gdb: altgrad-host conformance --only " + check + " with a debugger attached";
        describe_signal(note.get(), WTERMSIG(status), r);
        return r;
    }
    if (!decode(received, r)) {
        r.status = outcome::crashed;
        r.reason = "the check's process exited (status " + std::to_string(WEXITSTATUS(status)) +
                   ") without reporting a result" + note.during();
        r.hint = "the plugin may call exit() or abort()";
        return r;
    }
    r.check = check;
    r.seconds = elapsed();
    return r;
}

}  // namespace altgrad::host::conformance
