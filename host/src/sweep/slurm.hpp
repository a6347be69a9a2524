// `sweep --slurm`: the sweep as Slurm job arrays, one task per run not yet
// done, one array per rank layout (nodes x ntasks_per_node: a task's
// allocation). Each task runs `altgrad-host sweep FILE --out OUT --task
// $SLURM_ARRAY_TASK_ID`, which runs (or resumes, or skips) that one run,
// deciding which once in the batch step, then starting a run of several
// ranks with srun (--srun); a requeued task (--requeue:
// pre-emption, a node failure) runs the same command and so resumes from the
// run's last checkpoint. Run directories and logs are under OUT, which every
// node must see (a shared filesystem).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "sweep/sweep_file.hpp"

namespace altgrad::host::sweep {

namespace fs = std::filesystem;

// Sorted indices as Slurm's --array list: "0-2,5,7-9".
std::string array_list(const std::vector<size_t>& indices);

struct slurm_job {
    std::string name;                         // --job-name: the sweep's name
    std::vector<size_t> tasks;                // the runs to do (indices), all of `layout`
    fs::path host, plugins, sweep_file, out;  // absolute
    // Each task's allocation: --nodes and --ntasks-per-node, one CPU per
    // rank; with more than one rank the task starts them with srun (--srun).
    rank_layout layout;
};

// The job script's text. Throws host::error when OUT cannot be written in an
// #SBATCH line (whitespace, quotes, '%', '\').
std::string sbatch_script(const slurm_job& job);

// OUT/slurm/sweep.sbatch for runs of one rank, OUT/slurm/sweep-NxT.sbatch
// for runs of N nodes x T ranks each (a job array per layout).
fs::path script_file(const fs::path& out, const rank_layout& layout);

// --slurm-args text split into arguments: on whitespace, with '...' and "..."
// quoting (no escapes). Throws usage_error on an unterminated quote.
std::vector<std::string> split_arguments(const std::string& text);

}  // namespace altgrad::host::sweep
