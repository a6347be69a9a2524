#include "sweep/slurm.hpp"

#include <cctype>

#include "sweep/run_state.hpp"
#include "util/error.hpp"

namespace altgrad::host::sweep {

std::string array_list(const std::vector<size_t>& indices) {
    std::string out;
    for (size_t i = 0; i < indices.size();) {
        size_t j = i;
        while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(indices[i]);
        if (j > i) out += "-" + std::to_string(indices[j]);
        i = j + 1;
    }
    return out;
}

fs::path script_file(const fs::path& out, const rank_layout& layout) {
    if (layout.ranks() == 1) return out / "slurm" / "sweep.sbatch";
    return out / "slurm" /
           ("sweep-" + std::to_string(layout.nodes) + "x" + std::to_string(layout.ntasks_per_node) +
            ".sbatch");
}

std::string sbatch_script(const slurm_job& job) {
    const std::string out = job.out.string();
    // #SBATCH lines are not shell: no quoting, and '%' is a filename pattern.
    if (out.find_first_of(" \t\n\r'\"%\\") != std::string::npos)
        throw error(
            "--slurm: the output folder " + out +
            " holds a space, quote, '%' or '\\', which an #SBATCH --output line cannot hold: choose --out "
            "without them");
    const bool ranks = job.layout.ranks() > 1;
    std::string script =
        "#!/bin/bash\n# The sweep " + job.name +
        " as a Slurm job array, written by altgrad-host sweep --slurm\n"
        "# (docs/sweeps.md): one task per run not yet finished; a task runs, resumes or\n"
        "# skips run $SLURM_ARRAY_TASK_ID, so a requeued task continues from its checkpoint.\n"
        "#SBATCH --job-name=" +
        job.name + "\n#SBATCH --array=" + array_list(job.tasks) + "\n";
    if (ranks)  // each task an allocation of the run's ranks, one CPU each
        script += "#SBATCH --nodes=" + std::to_string(job.layout.nodes) +
                  "\n#SBATCH --ntasks-per-node=" + std::to_string(job.layout.ntasks_per_node) + "\n";
    script += "#SBATCH --cpus-per-task=1\n#SBATCH --requeue\n#SBATCH --output=" + out +
              "/logs/slurm-%A_%a.log\n"
              "#SBATCH --open-mode=append\n";  // a requeued task adds to its log, not replaces it
    return script + "exec " +
           shell_words({job.host.string(), "--plugins", job.plugins.string(), "sweep",
                        job.sweep_file.string(), "--out", out, "--task"}) +
           " \"$SLURM_ARRAY_TASK_ID\"" + (ranks ? " --srun" : "") + "\n";
}

std::vector<std::string> split_arguments(const std::string& text) {
    std::vector<std::string> out;
    std::string word;
    bool in_word = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\'' || c == '"') {
            const size_t end = text.find(c, i + 1);
            if (end == std::string::npos)
                throw usage_error("sweep: --slurm-args \"" + text + "\": unterminated " +
                                  (c == '\'' ? "'" : "\"") + " quote");
            word += text.substr(i + 1, end - i - 1);
            in_word = true;
            i = end;
        } else if (std::isspace(static_cast<unsigned char>(c))) {
            if (in_word) out.push_back(word);
            word.clear();
            in_word = false;
        } else {
            word += c;
            in_word = true;
        }
    }
    if (in_word) out.push_back(word);
    return out;
}

}  // namespace altgrad::host::sweep
