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

// `run --nproc N`: N ranks of one distributed run on this machine
// (docs/distributed.md), watched by this process as supervise_training
// watches one. Forks N times; call it before anything starts threads. Each
// rank gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR = 127.0.0.1 and
// MASTER_PORT (the environment's, else a free loopback port) and returns
// nothing, its stop handlers installed. The watcher passes SIGINT and SIGTERM
// on to every rank and, once all have ended, returns the status `run` exits
// with: kCrashedExitCode when a signal killed a rank (the other ranks are
// killed at once, and summary.json says "crashed", naming the rank, its
// plugin and call), else rank 0's status, or a failing rank's when rank 0's
// is 0. Throws host::error when it cannot start them.
std::optional<int> supervise_ranks(int ranks, const std::filesystem::path& plugins_dir, std::ostream& err);

// The signal (SIGINT or SIGTERM) that asked this training process to stop, 0 when none did.
int stop_requested();

// "SIGSEGV" (the number for a signal without a name).
std::string signal_name(int signal);

// The summary of a run whose training process `signal` killed, from its
// config.toml and metrics.jsonl (steps, losses, switches, intervention counts).
summary_record crash_summary(const std::filesystem::path& run_dir, const call_snapshot& at, int signal,
                             double seconds);

}  // namespace altgrad::host::run
