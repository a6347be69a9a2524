#include "sweep/local_pool.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <deque>
#include <thread>

#include "run/supervise.hpp"
#include "util/error.hpp"
#include "util/file_tree.hpp"
#include "util/process.hpp"

namespace altgrad::host::sweep {

namespace {

using clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int signal) {
    if (g_stop == 0) g_stop = signal;
}

// SIGINT and SIGTERM set g_stop while the pool runs; the old handlers come back after.
class stop_signals {
public:
    stop_signals() {
        g_stop = 0;
        struct sigaction sa {};
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGINT, &sa, &old_int_);
        ::sigaction(SIGTERM, &sa, &old_term_);
    }
    ~stop_signals() {
        ::sigaction(SIGINT, &old_int_, nullptr);
        ::sigaction(SIGTERM, &old_term_, nullptr);
    }
    stop_signals(const stop_signals&) = delete;
    stop_signals& operator=(const stop_signals&) = delete;

private:
    struct sigaction old_int_ {
    }, old_term_{};
};

struct worker {
    pid_t pid = 0;
    size_t run = 0;
    clock::time_point started;
};

std::string exit_text(int status) {
    if (WIFSIGNALED(status)) return run::signal_name(WTERMSIG(status));
    return "exit " + std::to_string(WEXITSTATUS(status));
}

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

// Appends `text` to an open log, as much as it takes.
void write_all(int fd, const std::string& text) {
    for (size_t at = 0; at < text.size();) {
        const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the worker's own output will meet the same problem and say so
        at += static_cast<size_t>(n);
    }
}

}  // namespace

std::string duration_text(double seconds) {
    const long s = seconds < 0 ? 0 : static_cast<long>(seconds + 0.5);
    if (s < 60) return std::to_string(s) + "s";
    if (s < 3600) return std::to_string((s + 30) / 60) + "m";
    const long m = (s + 30) / 60;
    const std::string mm = std::to_string(m % 60);
    return std::to_string(m / 60) + "h" + (mm.size() < 2 ? "0" : "") + mm + "m";
}

namespace {

// The pool while it runs: the runs waiting, the workers running and how the
// runs ended so far, and what standard error shows of it.
struct pool {
    const std::string& sweep_name;
    const std::vector<sweep_run>& runs;
    const pool_options& o;
    std::ostream& err;
    const std::string head = "sweep " + sweep_name + ": ";
    pool_result result;
    std::deque<size_t> queue;
    std::vector<worker> running;
    std::vector<double> durations;  // of runs that ended with a result, in this invocation
    bool forwarded = false;
    std::string shown;  // the progress text last written
    clock::time_point shown_at;

    pool(const std::string& sweep_name_, const std::vector<sweep_run>& runs_, const std::vector<size_t>& todo,
         const pool_options& o_, std::ostream& err_)
        : sweep_name(sweep_name_), runs(runs_), o(o_), err(err_), queue(todo.begin(), todo.end()) {
        result.done = runs.size() - todo.size();
    }

    // Starts workers while there are free slots, and records each as it ends,
    // until every run has ended or a stop signal has ended the running ones.
    pool_result run() {
        show_progress(true);
        while (!queue.empty() || !running.empty()) {
            if (g_stop != 0 && !forwarded) forward_stop_signal();
            while (g_stop == 0 && running.size() < o.jobs && !queue.empty()) {
                const size_t i = queue.front();
                queue.pop_front();
                start(i);
                show_progress(false);
            }
            if (g_stop != 0 && running.empty()) break;
            int status = 0;
            const pid_t pid = ::waitpid(-1, &status, WNOHANG);
            if (pid <= 0) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                show_progress(false);
                continue;
            }
            const auto it =
                std::find_if(running.begin(), running.end(), [&](const worker& w) { return w.pid == pid; });
            if (it == running.end()) continue;
            const worker w = *it;
            running.erase(it);
            record_end(w, status);
            show_progress(false);
        }
        if (o.live) err << "\r\033[K" << progress_text() << "\n" << std::flush;
        return result;
    }

    std::string progress_text() const {
        const size_t left = queue.size() + result.interrupted;
        std::string eta = "?";
        if (left + running.size() == 0) {
            eta = "0s";
        } else if (!durations.empty()) {
            double mean = 0;
            for (const double d : durations) mean += d;
            mean /= static_cast<double>(durations.size());
            // The runs left take the mean each; a running one, what the mean leaves of it.
            double work = mean * static_cast<double>(left);
            const auto now = clock::now();
            for (const worker& w : running)
                work += std::max(0.0, mean - std::chrono::duration<double>(now - w.started).count());
            eta = duration_text(work / static_cast<double>(o.jobs));
        }
        return head + std::to_string(result.done) + " done, " + std::to_string(running.size()) +
               " running, " + std::to_string(result.failed.size()) + " failed, " + std::to_string(left) +
               " left, ETA " + eta;
    }

    // One line per change, or one line redrawn in place on a terminal.
    void show_progress(bool force) {
        const std::string text = progress_text();
        const auto now = clock::now();
        if (o.live) {
            if (text == shown && !force && now - shown_at < std::chrono::seconds(1)) return;
            err << "\r\033[K" << text << std::flush;
        } else {
            // A change of the counts, not the ETA's countdown: a log gets no line a second.
            const auto counts = [](const std::string& t) { return t.substr(0, t.rfind(", ETA")); };
            if (counts(text) == counts(shown)) return;
            err << text << "\n" << std::flush;
        }
        shown = text, shown_at = now;
    }

    void say(const std::string& line) {
        if (o.live) err << "\r\033[K";
        err << head << line << "\n" << std::flush;
        if (o.live) shown.clear();
    }

    // SIGINT or SIGTERM came: on to every running worker, which checkpoints and exits.
    void forward_stop_signal() {
        forwarded = true;
        result.stop_signal = g_stop;
        for (const worker& w : running) ::kill(w.pid, g_stop);
        say(run::signal_name(g_stop) + ": stopping " + std::to_string(running.size()) +
            " running run(s) at their next step (each writes a checkpoint)");
    }

    // Run i's lock (see local_pool.hpp), its folder as `run` needs it, and its
    // worker; a run another process finished meanwhile counts as done.
    void start(size_t i) {
        const sweep_run& r = runs[i];
        const fs::path dir = run_dir(o.out, r);
        const std::string label = "run " + std::to_string(r.index) + " " + r.name;
        int lock = -1;
        try {
            fs::create_directories(log_file(o.out, r).parent_path());
            lock = ::open(lock_file(o.out, r).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
            if (lock < 0)
                throw error(lock_file(o.out, r).string() + ": cannot open: " + std::strerror(errno));
            // Only "held by another" stops the run; a filesystem without locks (ENOLCK) goes unguarded.
            if (::flock(lock, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
                throw error("another sweep process is running it (" + lock_file(o.out, r).string() +
                            " is locked)");
        } catch (const std::exception& e) {
            if (lock >= 0) ::close(lock);
            result.failed.push_back({&r, first_line(e.what())});
            say(label + ": not started: " + first_line(e.what()));
            return;
        }
        const run_status status = status_of(dir);
        if (is_done(status)) {  // another process finished it meanwhile
            ::close(lock);
            ++result.done;
            return;
        }
        try {
            if (status != run_status::interrupted && fs::exists(dir)) {
                // Nothing to resume from: `run --out` needs an empty folder.
                remove_tree(dir);
                say(label + ": cleared its run directory (" +
                    (status == run_status::failed ? "failed" : "no summary") +
                    ", no checkpoint): starting it again");
            }
            const int log =
                ::open(log_file(o.out, r).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (log < 0) throw error(log_file(o.out, r).string() + ": cannot open: " + std::strerror(errno));
            const std::vector<std::string> argv =
                run_command(o.host, o.plugins, o.out, r, status, o.launcher);
            write_all(log, "==== " + utc_now() + " altgrad-host sweep " + sweep_name + ": " +
                               (status == run_status::interrupted ? "resume" : "start") + ": " +
                               shell_words(argv) + "\n");
            pid_t pid = -1;
            try {
                pid = spawn_process(argv, log, true, lock);  // the worker holds the lock from here
            } catch (...) {
                ::close(log);
                throw;
            }
            ::close(log);
            ::close(lock);
            lock = -1;
            running.push_back({pid, i, clock::now()});
            say(label + (status == run_status::interrupted ? ": resumed from its checkpoint" : ": started") +
                ", log " + log_file(o.out, r).string());
        } catch (const std::exception& e) {
            if (lock >= 0) ::close(lock);
            result.failed.push_back({&r, first_line(e.what())});
            say(label + ": failed to start: " + first_line(e.what()));
        }
    }

    // How worker w's run ended: a result (finished or collapsed), stopped with
    // a checkpoint by the stop signal, or failed.
    void record_end(const worker& w, int status) {
        const sweep_run& r = runs[w.run];
        const double seconds = std::chrono::duration<double>(clock::now() - w.started).count();
        const std::string label = "run " + std::to_string(r.index) + " " + r.name;
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code == 0 || code == 3) {  // finished, or collapsed: a result either way
            ++result.done;
            durations.push_back(seconds);
            say(label + (code == 0 ? ": finished" : ": collapsed (a result; reports/failure.md says why)") +
                " in " + duration_text(seconds));
        } else if (code == run::kInterruptedExitCode && result.stop_signal != 0) {
            ++result.interrupted;
            say(label + ": stopped with a checkpoint");
        } else {
            result.failed.push_back({&r, exit_text(status)});
            say(label + ": failed (" + exit_text(status) + "), log " + log_file(o.out, r).string());
        }
    }
};

}  // namespace

pool_result run_pool(const std::string& sweep_name, const std::vector<sweep_run>& runs,
                     const std::vector<size_t>& todo, const pool_options& o, std::ostream& err) {
    const stop_signals signals;
    return pool(sweep_name, runs, todo, o, err).run();
}

}  // namespace altgrad::host::sweep
