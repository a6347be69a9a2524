// Where one run of a sweep stands, read from its run directory (run/files.hpp),
// and the `altgrad-host run` command that makes progress on it: nothing for a
// finished or collapsed run, `run --resume` for one with a checkpoint, a fresh
// `run CONFIG --out DIR --set ...` otherwise. The sweep's output folder:
//   OUT/<run name>/        each run's ordinary run directory
//   OUT/logs/<run name>.log  its log (appended to by every attempt)
//   OUT/logs/<run name>.lock flock'ed by the process working on the run
//   OUT/slurm/sweep.sbatch   the job script of --slurm
//   OUT/.altgrad-sweep       marks OUT as a sweep's folder (the sweep file's path):
//                            `report OUT/*/` passes over logs/ and slurm/
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sweep/sweep_file.hpp"

namespace altgrad::host::sweep {

enum class run_status {
    fresh,        // no run directory, or one without summary.json and checkpoint (started fresh)
    finished,     // summary.json: finished
    collapsed,    // summary.json: collapsed (a result: not run again)
    interrupted,  // a checkpoint and no final summary (interrupted, crashed, killed): resumed
    failed,       // summary.json: error, or crashed/interrupted before any checkpoint: started fresh
};
// "new", "finished", "collapsed", "interrupted", "failed" (--dry-run's words).
const char* status_name(run_status s);
// Finished and collapsed runs are done: a sweep skips them.
inline bool is_done(run_status s) { return s == run_status::finished || s == run_status::collapsed; }

run_status status_of(const fs::path& run_dir);

fs::path run_dir(const fs::path& out, const sweep_run& r);    // OUT/<name>
fs::path log_file(const fs::path& out, const sweep_run& r);   // OUT/logs/<name>.log
fs::path lock_file(const fs::path& out, const sweep_run& r);  // OUT/logs/<name>.lock (held by its worker)

// Writes OUT/.altgrad-sweep (the sweep file's absolute path).
void mark_sweep_folder(const fs::path& out, const fs::path& sweep_file);
// OUT/logs or OUT/slurm of a marked sweep folder: the sweep's own, not a run.
bool is_sweep_housekeeping(const fs::path& dir);

// Who starts a run's ranks when it has more than one (sweep_run::layout):
// the host itself on this machine (run --nproc K), or srun inside a Slurm
// allocation of the layout's nodes and tasks (sweep --slurm's job script).
enum class rank_launcher { local, srun };

// The command that makes progress on `r` in `status`: HOST --plugins PLUGINS
// run --resume DIR --fallback, or HOST --plugins PLUGINS run CONFIG --out DIR
// --set ...; for K > 1 ranks, with --nproc K (local) or after srun --nodes N
// --ntasks-per-node T --ntasks K --kill-on-bad-exit=1 (srun).
std::vector<std::string> run_command(const fs::path& host, const fs::path& plugins, const fs::path& out,
                                     const sweep_run& r, run_status status,
                                     rank_launcher launcher = rank_launcher::local);

// argv as a shell would need it typed (for --dry-run and messages; never run through a shell).
std::string shell_words(const std::vector<std::string>& argv);

}  // namespace altgrad::host::sweep
