// `run` trains in a child process it watches, so a plugin that crashes the
// training (a segfault in quantize) still leaves a summary naming the plugin
// and the call, and a line saying how to resume. The child notes each plugin
// call in memory both share (plugins/call_record.hpp): nothing runs in a
// signal handler. The child dies with its parent (PR_SET_PDEATHSIG), so a
// kill -9 of `run` stops the training as before.
//
// SIGINT (Ctrl-C) and SIGTERM (a scheduler's pre-emption) ask the training to
// stop: the parent passes them on to the child, whose handler only sets a
// flag; the training loop reads it once per step (stop_requested), writes a
// checkpoint and summary.json with status "interrupted", and `run` exits
// kInterruptedExitCode. A second such signal changes nothing (the tty and a
// forwarding parent may both deliver one Ctrl-C); SIGKILL stops at once.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "plugins/call_record.hpp"
#include "run/records.hpp"

namespace altgrad::host::run {

// `run`'s exit status when a signal ended its training process.
inline constexpr int kCrashedExitCode = 4;
// `run`'s exit status when SIGINT or SIGTERM stopped the training (128 + SIGINT, the shell's convention).
inline constexpr int kInterruptedExitCode = 130;

// Forks; call it before anything starts threads. In the child (which trains)
// returns nothing. In the parent, once the child has ended, returns the
// status `run` exits with: the child's own, or kCrashedExitCode after writing
// summary.json with status "crashed" (when the run directory existed) and
// one line on `err` naming the plugin, the call, the step and how to resume.
// Without a shared record or a fork, returns nothing and nothing is watched.
// Either way the process that trains has its stop handlers installed.
std::optional<int> supervise_training(const std::filesystem::path& plugins_dir, std::ostream& err);

// The signal (SIGINT or SIGTERM) that asked this training process to stop, 0 when none did.
int stop_requested();

// "SIGSEGV" (the number for a signal without a name).
std::string signal_name(int signal);

// The summary of a run whose training process `signal` killed, from its
// config.toml and metrics.jsonl (steps, losses, switches, intervention counts).
summary_record crash_summary(const std::filesystem::path& run_dir, const call_snapshot& at, int signal,
                             double seconds);

}  // namespace altgrad::host::run
