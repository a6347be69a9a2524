// Runs a sweep's runs on this machine: up to `jobs` `altgrad-host run` worker
// processes at a time (fork + exec of this host with an argument vector, no
// shell), each with standard output and error appended to its log, and a live
// progress line on standard error. Finished and collapsed runs are skipped;
// interrupted ones resume from their checkpoint; the rest start fresh.
//
// One process at a time works on a run: a worker holds an flock on
// OUT/logs/<name>.lock until it ends (inherited, so it outlives a killed
// sweep as long as its worker runs); a run locked by another sweep process
// (a second sweep, a duplicate Slurm task) fails here with a line saying so.
//
// SIGINT and SIGTERM stop the sweep: no new run starts, the signal goes on to
// every running worker (which checkpoints and exits 130), and once they have
// all ended the pool returns `stopped`. A worker dies with the pool
// (PR_SET_PDEATHSIG, SIGTERM: it checkpoints), so a killed sweep leaves no
// orphans writing into its run directories.
#pragma once

#include <cstddef>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "sweep/run_state.hpp"
#include "sweep/sweep_file.hpp"

namespace altgrad::host::sweep {

struct pool_options {
    fs::path host;     // the altgrad-host binary the workers run
    fs::path plugins;  // --plugins of every worker
    fs::path out;      // the sweep's output folder
    size_t jobs = 1;
    bool live = false;  // standard error is a terminal: one line updated in place
    // Who starts a run of several ranks (all of them one worker; a job of the pool).
    rank_launcher launcher = rank_launcher::local;
};

struct failed_run {
    const sweep_run* run = nullptr;
    std::string why;  // "exit 1", "SIGKILL"
};

struct pool_result {
    size_t done = 0;                 // finished or collapsed, before or now
    std::vector<failed_run> failed;  // in the order they failed
    size_t interrupted = 0;          // stopped by the signal, with a checkpoint
    int stop_signal = 0;             // SIGINT or SIGTERM when one stopped the sweep
};

// Runs `todo` (indices into `runs`) and says how they ended; progress and
// per-run lines go to `err`, headed "sweep NAME:".
pool_result run_pool(const std::string& sweep_name, const std::vector<sweep_run>& runs,
                     const std::vector<size_t>& todo, const pool_options& o, std::ostream& err);

// "12s", "14m", "2h05m".
std::string duration_text(double seconds);

}  // namespace altgrad::host::sweep
