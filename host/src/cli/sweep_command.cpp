// altgrad-host sweep: many runs from one sweep file (sweep/sweep_file.hpp),
// on this machine with a pool of worker processes (sweep/local_pool.hpp), one
// run in this process's place (--task, for Slurm array tasks), or submitted
// to Slurm as a job array (sweep/slurm.hpp). docs/sweeps.md.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iomanip>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "run/files.hpp"
#include "run/supervise.hpp"
#include "sweep/local_pool.hpp"
#include "sweep/run_state.hpp"
#include "sweep/slurm.hpp"
#include "sweep/sweep_file.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace altgrad::host::cli {

namespace fs = std::filesystem;

namespace {

// `sbatch ARGS... SCRIPT`, its output on ours; its exit status.
int submit(const std::vector<std::string>& slurm_args, const fs::path& script) {
    std::vector<std::string> argv = {"sbatch"};
    argv.insert(argv.end(), slurm_args.begin(), slurm_args.end());
    argv.push_back(script.string());
    pid_t pid = -1;
    try {
        std::cout << std::flush;
        pid = spawn_process(argv, -1, false);
    } catch (const error& e) {
        throw error("sweep: --slurm: " + std::string(e.what()) + " (is Slurm installed and on PATH? the job script is " +
                    script.string() + ")");
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    std::cerr << "altgrad-host: sweep: sbatch ended by " << run::signal_name(WTERMSIG(status)) << "\n";
    return 1;
}

}  // namespace

int sweep_command(const context& ctx, const args& a) {
    po::options_description options("sweep options");
    std::string file, out, jobs_text = "1", task_text, slurm_args;
    bool dry_run = false, slurm = false;
    po::options_description operands;
    operands.add_options()("sweep", po::value<std::string>(&file));
    options.add_options()("out", po::value<std::string>(&out), "the sweep's output folder (default: runs/<name>)")(
        "jobs", po::value<std::string>(&jobs_text), "worker processes at a time (default 1; each trains with the "
                                                     "sweep's training.threads, 1 unless it sets it)")(
        "dry-run", po::bool_switch(&dry_run), "list the runs (index, name, status, command) and run nothing; "
                                               "with --slurm: write the job script, submit nothing")(
        "task", po::value<std::string>(&task_text), "run only run I (a Slurm array task): resume it, skip it if "
                                                    "done, or start it")(
        "slurm", po::bool_switch(&slurm), "submit the runs not yet done as a Slurm job array (sbatch)")(
        "slurm-args", po::value<std::string>(&slurm_args), "with --slurm: arguments for sbatch, e.g. "
                                                           "\"--partition=gpu --time=2:00:00\"");
    po::positional_options_description pos;
    pos.add("sweep", 1);
    po::variables_map vm;
    const command_help help{
        "sweep",
        {"[--plugins DIR] sweep SWEEP.toml [--out DIR] [--jobs N] [--dry-run]",
         "[--plugins DIR] sweep SWEEP.toml [--out DIR] --task I",
         "[--plugins DIR] sweep SWEEP.toml [--out DIR] --slurm [--slurm-args \"ARGS\"] [--dry-run]"},
        "altgrad-host --plugins build/plugins sweep sweeps/formats.toml --jobs 2",
        {{0, "every run finished or collapsed (with --slurm: sbatch's status; with --dry-run: listed)"},
         {1, "an error (a bad sweep file or config: nothing ran), or some runs failed: they are listed with their logs"},
         {run::kInterruptedExitCode, "SIGINT (Ctrl-C) or SIGTERM stopped the sweep: the running runs wrote "
                                     "checkpoints; the same command continues it"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (file.empty()) throw usage_error("sweep: give a SWEEP.toml");
    const uint64_t jobs = unsigned_option("sweep", "jobs", jobs_text);
    if (jobs < 1 || jobs > 1024) throw usage_error("sweep: --jobs " + jobs_text + ": expected 1..1024");
    if (vm.count("slurm-args") && !slurm) throw usage_error("sweep: --slurm-args goes with --slurm");
    if (vm.count("task") && (slurm || dry_run || vm.count("jobs")))
        throw usage_error("sweep: --task runs one run: it excludes --slurm, --dry-run and --jobs");
    const std::vector<std::string> sbatch_args = sweep::split_arguments(slurm_args);

    const sweep::sweep_spec spec = sweep::load_sweep(file);
    const std::vector<sweep::sweep_run> runs = sweep::plan_runs(spec);
    const fs::path out_dir = out.empty() ? fs::path("runs") / spec.name : fs::path(out);
    const fs::path host = fs::read_symlink("/proc/self/exe");
    const fs::path plugins = fs::absolute(ctx.plugins).lexically_normal();
    std::vector<sweep::run_status> status;
    std::vector<size_t> todo;
    for (const sweep::sweep_run& r : runs) {
        status.push_back(sweep::status_of(sweep::run_dir(out_dir, r)));
        if (!sweep::is_done(status.back())) todo.push_back(r.index);
    }
    const std::string head = "sweep " + spec.name + ": ";

    if (!dry_run || slurm) sweep::mark_sweep_folder(out_dir, file);
    if (vm.count("task")) {
        const uint64_t i = unsigned_option("sweep", "task", task_text);
        if (i >= runs.size())
            throw usage_error("sweep: --task " + task_text + ": " + file + " has runs 0.." +
                              std::to_string(runs.size() - 1));
        if (sweep::is_done(status[i])) {
            std::cerr << head << "run " << i << " " << runs[i].name << ": already " << sweep::status_name(status[i])
                      << "\n";
            std::cout << sweep::run_dir(out_dir, runs[i]).string() << "\n";
            return 0;
        }
        todo = {static_cast<size_t>(i)};
    } else if (slurm) {
        if (todo.empty()) {
            std::cerr << head << "nothing left to run: all " << runs.size()
                      << " runs are finished or collapsed; nothing submitted\n";
            return 0;
        }
        const sweep::slurm_job job{spec.name, todo, host, plugins, fs::absolute(file).lexically_normal(),
                                   fs::absolute(out_dir).lexically_normal()};
        const std::string script = sweep::sbatch_script(job);
        fs::create_directories(sweep::script_file(job.out).parent_path());
        fs::create_directories(job.out / "logs");  // Slurm does not create --output's folder
        run::write_file_atomically(sweep::script_file(job.out), script);
        std::cerr << head << todo.size() << " of " << runs.size() << " runs to submit (array " << sweep::array_list(todo)
                  << "), job script " << sweep::script_file(job.out).string() << "\n";
        if (dry_run) return 0;
        return submit(sbatch_args, sweep::script_file(job.out));
    } else if (dry_run) {
        size_t width = 0;
        for (const sweep::sweep_run& r : runs) width = std::max(width, r.name.size());
        for (const sweep::sweep_run& r : runs) {
            const sweep::run_status s = status[r.index];
            std::vector<std::string> argv = {host.string()};
            const std::vector<std::string> rest = sweep::run_arguments(plugins, out_dir, r, s);
            argv.insert(argv.end(), rest.begin(), rest.end());
            std::cout << std::left << std::setw(4) << r.index << " " << std::setw(static_cast<int>(width)) << r.name
                      << "  " << std::setw(11) << sweep::status_name(s) << " "
                      << (sweep::is_done(s) ? "(skipped: done)" : sweep::shell_words(argv)) << "\n";
        }
        return 0;
    }

    sweep::pool_options o;
    o.host = host;
    o.plugins = plugins;
    o.out = out_dir;
    o.jobs = static_cast<size_t>(jobs);
    o.live = ::isatty(STDERR_FILENO) != 0;
    fs::create_directories(out_dir / "logs");
    if (vm.count("task")) o.jobs = 1;
    const sweep::pool_result result = sweep::run_pool(spec.name, runs, todo, o, std::cerr);
    std::cout << (vm.count("task") ? sweep::run_dir(out_dir, runs[todo[0]]) : out_dir).string() << "\n";
    for (const sweep::failed_run& f : result.failed)
        std::cerr << head << "failed: run " << f.run->index << " " << f.run->name << " (" << f.why << "), log "
                  << sweep::log_file(out_dir, *f.run).string() << "\n";
    if (result.stop_signal != 0) {
        std::vector<std::string> again = {host.string(), "--plugins", plugins.string(), "sweep", file, "--out",
                                          out_dir.string()};
        if (vm.count("task")) again.insert(again.end(), {"--task", task_text});
        else if (jobs != 1) again.insert(again.end(), {"--jobs", std::to_string(jobs)});
        std::cerr << head << run::signal_name(result.stop_signal)
                  << ": stopped; the interrupted runs have checkpoints; continue with the same command: "
                  << sweep::shell_words(again) << "\n";
        return run::kInterruptedExitCode;
    }
    return result.failed.empty() ? 0 : 1;
}

}  // namespace altgrad::host::cli
