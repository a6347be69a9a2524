#include "sweep/run_state.hpp"

#include <optional>

#include "run/files.hpp"

namespace altgrad::host::sweep {

const char* status_name(run_status s) {
    switch (s) {
        case run_status::fresh: return "new";
        case run_status::finished: return "finished";
        case run_status::collapsed: return "collapsed";
        case run_status::interrupted: return "interrupted";
        case run_status::failed: return "failed";
    }
    return "?";
}

run_status status_of(const fs::path& dir) {
    std::optional<run::summary_record> summary;
    if (fs::exists(run::summary_file(dir))) {
        try {
            summary = run::read_summary(run::summary_file(dir));
        } catch (const error&) {
            // Half-written or damaged: as if the run had ended without one.
        }
    }
    if (summary && summary->status == "finished") return run_status::finished;
    if (summary && summary->status == "collapsed") return run_status::collapsed;
    // An error is retried from the start: resuming would meet it again.
    if (summary && summary->status == "error") return run_status::failed;
    if (fs::is_directory(run::checkpoints_dir(dir))) {
        const std::optional<run::checkpoint_ref> last = run::latest_checkpoint(dir);
        if (last && !last->legacy) return run_status::interrupted;
    }
    return summary ? run_status::failed : run_status::fresh;
}

fs::path run_dir(const fs::path& out, const sweep_run& r) { return out / r.name; }
fs::path log_file(const fs::path& out, const sweep_run& r) { return out / "logs" / (r.name + ".log"); }
fs::path lock_file(const fs::path& out, const sweep_run& r) { return out / "logs" / (r.name + ".lock"); }

namespace {
const char* const kMarker = ".altgrad-sweep";
}

void mark_sweep_folder(const fs::path& out, const fs::path& sweep_file) {
    fs::create_directories(out);
    run::write_file_atomically(out / kMarker, fs::absolute(sweep_file).lexically_normal().string() + "\n");
}

bool is_sweep_housekeeping(const fs::path& dir) {
    // "runs/x/logs/" names "" last: its folder is the parent of that.
    const fs::path d = dir.filename().empty() ? dir.parent_path() : dir;
    return (d.filename() == "logs" || d.filename() == "slurm") &&
           fs::is_regular_file(d.parent_path() / kMarker);
}

std::vector<std::string> run_command(const fs::path& host, const fs::path& plugins, const fs::path& out,
                                     const sweep_run& r, run_status status, rank_launcher launcher) {
    const int64_t ranks = r.layout.ranks();
    std::vector<std::string> a;
    if (ranks > 1 && launcher == rank_launcher::srun)
        a = {"srun", "--nodes=" + std::to_string(r.layout.nodes),
             "--ntasks-per-node=" + std::to_string(r.layout.ntasks_per_node),
             "--ntasks=" + std::to_string(ranks), "--kill-on-bad-exit=1"};
    a.insert(a.end(), {host.string(), "--plugins", plugins.string(), "run"});
    if (status == run_status::interrupted) {
        // --fallback: a damaged newest checkpoint gives way to the newest intact
        // one; training is deterministic, so the run ends exactly as it would have.
        a.insert(a.end(), {"--resume", run_dir(out, r).string(), "--fallback"});
    } else {
        a.insert(a.end(), {r.config.string(), "--out", run_dir(out, r).string()});
        for (const std::string& o : r.overrides) a.insert(a.end(), {"--set", o});
    }
    if (ranks > 1 && launcher == rank_launcher::local) a.insert(a.end(), {"--nproc", std::to_string(ranks)});
    return a;
}

std::string shell_words(const std::vector<std::string>& argv) {
    std::string out;
    for (const std::string& w : argv) {
        if (!out.empty()) out += ' ';
        const bool plain = !w.empty() && w.find_first_not_of(
                                             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                             "0123456789_.,=+-/:@%") == std::string::npos;
        if (plain) {
            out += w;
            continue;
        }
        out += '\'';
        for (const char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
        out += '\'';
    }
    return out;
}

}  // namespace altgrad::host::sweep
