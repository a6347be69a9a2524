#include "run/supervise.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "config/run_config.hpp"
#include "run/files.hpp"

namespace altgrad::host::run {

namespace {

// Written by signal handlers, so of the one type they may write.
volatile std::sig_atomic_t stop_signal = 0;     // the training process's
volatile std::sig_atomic_t training_child = 0;  // the watching parent's: whom to pass the signal on to

constexpr int kStopSignals[] = {SIGINT, SIGTERM};

void note_stop(int signal) {
    if (stop_signal == 0) stop_signal = signal;
}

void pass_stop_on(int signal) {
    if (training_child > 0) ::kill(static_cast<pid_t>(training_child), signal);
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
// directory) and the one line.
void report_crash(const std::filesystem::path& plugins_dir, const call_snapshot& at, int signal,
                  double seconds, std::ostream& err) {
    std::string line = "altgrad-host: " + crash_text(at, signal);
    if (at.run_dir.empty()) {
        err << line << "; no run directory was made yet\n";
        return;
    }
    try {
        write_summary(at.run_dir, crash_summary(at.run_dir, at, signal, seconds));
        line += "; " + summary_file(at.run_dir).string() + " says so";
    } catch (const std::exception& e) {
        line += "; summary.json not written (" + first_line(e.what()) + ")";
    }
    if (const std::optional<checkpoint_ref> last = latest_checkpoint(at.run_dir))
        line += "; resume from its checkpoint at step " + std::to_string(last->step) +
                ": altgrad-host --plugins " + plugins_dir.string() + " run --resume " + at.run_dir.string();
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

}  // namespace altgrad::host::run
