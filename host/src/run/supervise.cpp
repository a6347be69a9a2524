#include "run/supervise.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "config/run_config.hpp"
#include "run/files.hpp"
#include "util/error.hpp"

namespace altgrad::host::run {

namespace {

// Written by signal handlers, so of the one type they may write.
volatile std::sig_atomic_t stop_signal = 0;     // the training process's
volatile std::sig_atomic_t training_child = 0;  // the watching parent's: whom to pass the signal on to
// run --nproc's watcher: its ranks, to pass the signal on to each.
constexpr int kMaxLocalRanks = 256;
volatile std::sig_atomic_t rank_children[kMaxLocalRanks] = {};
// How long the other ranks have to end on their own once one failed.
constexpr std::chrono::seconds kRankGrace{10};

constexpr int kStopSignals[] = {SIGINT, SIGTERM};

void note_stop(int signal) {
    if (stop_signal == 0) stop_signal = signal;
}

void pass_stop_on(int signal) {
    if (training_child > 0) ::kill(static_cast<pid_t>(training_child), signal);
    for (int r = 0; r < kMaxLocalRanks; ++r)
        if (rank_children[r] > 0) ::kill(static_cast<pid_t>(rank_children[r]), signal);
}

// SA_RESTART: a signal in the middle of writing a checkpoint must not fail the write with EINTR.
void handle_stop_signals(void (*handler)(int)) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int signal : kStopSignals) ::sigaction(signal, &action, nullptr);
}

// Blocks the stop signals until both sides of the fork have their handlers
// (a Ctrl-C in between would otherwise kill the parent, and with it the child).
struct stop_signals_blocked {
    stop_signals_blocked() {
        sigset_t stops;
        sigemptyset(&stops);
        for (int signal : kStopSignals) sigaddset(&stops, signal);
        ::pthread_sigmask(SIG_BLOCK, &stops, &before);
    }
    ~stop_signals_blocked() { ::pthread_sigmask(SIG_SETMASK, &before, nullptr); }
    sigset_t before;
};

// "signal 11 (SIGSEGV, Segmentation fault)".
std::string signal_text(int signal) {
    return "signal " + std::to_string(signal) + " (" + signal_name(signal) + ", " + ::strsignal(signal) + ")";
}

// "plugin 'e5m2' crashed in quantize after 5 steps: signal 11 (...)", or the
// same for a death outside any plugin call.
std::string crash_text(const call_snapshot& at, int signal) {
    const std::string steps =
        at.steps_done < 0 ? "while setting up" : "after " + std::to_string(at.steps_done) + " steps";
    if (at.in_call)
        return "plugin '" + at.plugin + "' crashed the run in " + at.call + " " + steps + ": " +
               signal_text(signal);
    return "the training process died of " + signal_text(signal) + " " + steps + ", in no plugin call" +
           (at.plugin.empty() ? "" : " (the last one: plugin '" + at.plugin + "' " + at.call + ")");
}

// After the child died of `signal`: the summary (when there is a run
// directory) and the one line; `rank` ("rank 1 of 2: ") names a distributed run's.
void report_crash(const std::filesystem::path& plugins_dir, const call_snapshot& at, int signal,
                  double seconds, std::ostream& err, const std::string& rank = "", int ranks = 1) {
    std::string line = "altgrad-host: " + rank + crash_text(at, signal);
    if (at.run_dir.empty()) {
        err << line << "; no run directory was made yet\n";
        return;
    }
    try {
        summary_record s = crash_summary(at.run_dir, at, signal, seconds);
        s.failure_evidence = rank + s.failure_evidence;
        write_summary(at.run_dir, s);
        line += "; " + summary_file(at.run_dir).string() + " says so";
    } catch (const std::exception& e) {
        line += "; summary.json not written (" + first_line(e.what()) + ")";
    }
    if (const std::optional<checkpoint_ref> last = latest_checkpoint(at.run_dir))
        line += "; resume from its checkpoint at step " + std::to_string(last->step) +
                ": altgrad-host --plugins " + plugins_dir.string() + " run --resume " + at.run_dir.string() +
                (ranks > 1 ? " --nproc " + std::to_string(ranks) : "");
    else line += "; it wrote no checkpoint: start it again";
    err << line << "\n";
}

}  // namespace

std::string signal_name(int signal) {
    const char* abbrev = ::sigabbrev_np(signal);
    return abbrev ? std::string("SIG") + abbrev : std::to_string(signal);
}

int stop_requested() { return stop_signal; }

summary_record crash_summary(const std::filesystem::path& run_dir, const call_snapshot& at, int signal,
                             double seconds) {
    const config::run_config c = config::load_config(config_file(run_dir));
    const metrics_contents m = read_metrics(metrics_file(run_dir));
    summary_record s;
    s.run_id = m.run_id.empty() ? run_dir.filename().string() : m.run_id;
    s.name = c.name;
    s.status = "crashed";
    s.failure_mode = "none";  // not a training failure: the process died
    s.failure_evidence = crash_text(at, signal);
    s.max_steps = c.training.max_steps;
    s.seed = c.training.seed;
    s.values.set("seconds", seconds);
    s.formats = {c.quantization.weight_format, c.quantization.activation_format,
                 c.quantization.gradient_format};
    double best = NAN;
    for (const metrics_line& line : m.lines) {
        if (const auto* t = std::get_if<train_line>(&line)) {
            s.steps_done = t->step;
            s.values.set("final_train_loss", t->values.get("loss"));
        } else if (const auto* v = std::get_if<val_line>(&line)) {
            const double val = v->values.get("val_loss");
            s.values.set("final_val_loss", val);
            if (!std::isnan(val) && !(val >= best)) best = val;
        } else if (const auto* e = std::get_if<event_line>(&line)) {
            tally_event(*e, s.switches, s.interventions);
        }
    }
    s.values.set("best_val_loss", best);
    if (at.steps_done >= 0) s.steps_done = at.steps_done;
    crash_record r;
    r.signal = signal;
    r.signal_name = signal_name(signal);
    if (at.in_call) {
        r.plugin = at.plugin;
        r.call = at.call;
    }
    r.steps_done = s.steps_done;
    s.crash = r;
    return s;
}

std::optional<int> supervise_training(const std::filesystem::path& plugins_dir, std::ostream& err) {
    call_record* record = make_shared_call_record();
    if (record == nullptr) {
        handle_stop_signals(note_stop);
        return std::nullopt;
    }
    const pid_t parent = ::getpid();
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);  // else the child repeats what is buffered
    pid_t child = 0;
    {
        const stop_signals_blocked blocked;
        child = ::fork();
        if (child <= 0) {
            if (child == 0) {
                // Die with the parent; it may have gone before prctl.
                if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(1);
                note_calls_in(record);
            }
            handle_stop_signals(note_stop);  // the child, or this process when it could not fork
            return std::nullopt;
        }
        training_child = child;
        handle_stop_signals(pass_stop_on);
    }
    const auto start = std::chrono::steady_clock::now();
    int status = 0;
    while (::waitpid(child, &status, 0) < 0)
        if (errno != EINTR) {
            err << "altgrad-host: error: cannot wait for the training process: " << std::strerror(errno)
                << "\n";
            return 1;
        }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report_crash(plugins_dir, read_call_record(*record), WTERMSIG(status), seconds, err);
    return kCrashedExitCode;
}

namespace {

// A loopback port no one listens on now (rank 0 binds it a moment later).
uint16_t free_loopback_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok)
        throw error(std::string("run --nproc: no free loopback port for the ranks' rendezvous: ") +
                    std::strerror(errno));
    return ntohs(a.sin_port);
}

// In a rank just forked: where it is, for train/distributed.hpp.
void set_rank_environment(int rank, int ranks, uint16_t port) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(ranks).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
}

// Waits for every rank, each one's wait status into `status`. Returns the
// first rank a signal killed (the others are killed at once: they would wait
// for it until their timeout), -1 when none was; nothing when waiting failed.
std::optional<int> wait_for_ranks(const std::vector<pid_t>& pids, std::vector<int>& status,
                                  std::ostream& err) {
    int crashed = -1;                                              // the first rank a signal killed
    std::optional<std::chrono::steady_clock::time_point> give_up;  // once a rank failed
    const auto stop_the_rest = [&] {
        for (size_t k = 0; k < pids.size(); ++k)
            if (rank_children[k] > 0) ::kill(pids[k], SIGKILL);
    };
    for (auto left = pids.size(); left > 0;) {
        int st = 0;
        const pid_t done = ::waitpid(-1, &st, WNOHANG);
        if (done < 0 && errno != EINTR) {
            err << "altgrad-host: error: cannot wait for the ranks: " << std::strerror(errno) << "\n";
            stop_the_rest();
            return std::nullopt;
        }
        if (done <= 0) {
            // A rank that failed: the others fail at their next collective; one
            // stuck elsewhere (a rendezvous that answers no one) is stopped.
            if (give_up && std::chrono::steady_clock::now() > *give_up) stop_the_rest();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        const auto it = std::find(pids.begin(), pids.end(), done);
        if (it == pids.end()) continue;
        const auto r = static_cast<size_t>(it - pids.begin());
        const bool killed_here = give_up && std::chrono::steady_clock::now() > *give_up;
        status[r] = st;
        rank_children[r] = 0;
        --left;
        if (WIFSIGNALED(st) && crashed < 0 && !killed_here) {
            crashed = static_cast<int>(r);
            stop_the_rest();  // they would wait for it until their timeout
        } else if (!WIFSIGNALED(st) && WEXITSTATUS(st) != 0 && !give_up) {
            give_up = std::chrono::steady_clock::now() + kRankGrace;
        }
    }
    return crashed;
}

}  // namespace

std::optional<int> supervise_ranks(int ranks, const std::filesystem::path& plugins_dir, std::ostream& err) {
    if (ranks < 1 || ranks > kMaxLocalRanks)
        throw error("run --nproc " + std::to_string(ranks) + ": expected 1.." +
                    std::to_string(kMaxLocalRanks));
    if (std::getenv("RANK") != nullptr || std::getenv("WORLD_SIZE") != nullptr)
        throw error(
            "run --nproc: this process is already a rank of a distributed run (RANK or WORLD_SIZE is "
            "set): its launcher starts the ranks");
    const char* given = std::getenv("MASTER_PORT");
    const uint16_t port =
        given != nullptr && *given != '\0' ? static_cast<uint16_t>(std::atoi(given)) : free_loopback_port();
    std::vector<call_record*> records;
    for (int r = 0; r < ranks; ++r) records.push_back(make_shared_call_record());
    const pid_t parent = ::getpid();
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::vector<pid_t> pids(static_cast<size_t>(ranks), 0);
    {
        const stop_signals_blocked blocked;
        for (int r = 0; r < ranks; ++r) {
            const pid_t child = ::fork();
            if (child < 0) {
                for (int k = 0; k < r; ++k) ::kill(pids[static_cast<size_t>(k)], SIGKILL);
                throw error(std::string("run --nproc: cannot start rank ") + std::to_string(r) + ": " +
                            std::strerror(errno));
            }
            if (child == 0) {
                if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(1);
                set_rank_environment(r, ranks, port);
                // What ps and top show for it (/proc/PID/comm), "altgrad-rank1".
                ::prctl(PR_SET_NAME, ("altgrad-rank" + std::to_string(r)).c_str());
                if (records[static_cast<size_t>(r)]) note_calls_in(records[static_cast<size_t>(r)]);
                handle_stop_signals(note_stop);
                return std::nullopt;
            }
            pids[static_cast<size_t>(r)] = child;
            rank_children[r] = child;
        }
        handle_stop_signals(pass_stop_on);
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<int> status(static_cast<size_t>(ranks), 0);
    const std::optional<int> crashed = wait_for_ranks(pids, status, err);
    if (!crashed) return 1;
    if (*crashed >= 0) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const auto r = static_cast<size_t>(*crashed);
        const call_snapshot at = records[r] ? read_call_record(*records[r]) : call_snapshot{};
        report_crash(plugins_dir, at, WTERMSIG(status[r]), seconds, err,
                     "rank " + std::to_string(*crashed) + " of " + std::to_string(ranks) + ": ", ranks);
        return kCrashedExitCode;
    }
    // A rank stopped here after the grace (a signal) counts as failed.
    const auto exit_status = [](int st) { return WIFSIGNALED(st) ? 1 : WEXITSTATUS(st); };
    if (exit_status(status[0]) != 0) return exit_status(status[0]);
    for (int st : status)
        if (exit_status(st) != 0) return exit_status(st);
    return 0;
}

}  // namespace altgrad::host::run
