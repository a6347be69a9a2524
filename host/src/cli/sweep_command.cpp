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
        throw error("sweep: --slurm: " + std::string(e.what()) +
                    " (is Slurm installed and on PATH? the job script is " + script.string() + ")");
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    std::cerr << "altgrad-host: sweep: sbatch ended by " << run::signal_name(WTERMSIG(status)) << "\n";
    return 1;
}

// The command line of `sweep`, checked.
struct sweep_request {
    std::string file, out, jobs_text = "1", task_text, slurm_args;
    bool dry_run = false, slurm = false;
    bool task = false;  // --task given
    bool srun = false;  // --srun: the task's ranks through srun
    uint64_t jobs = 1;
    std::vector<std::string> sbatch_args;
};

// Parses the arguments after `sweep`; false when --help was asked for (and shown).
bool read_request(const args& a, sweep_request& q) {
    po::options_description options("sweep options");
    po::options_description operands;
    operands.add_options()("sweep", po::value<std::string>(&q.file));
    options.add_options()("out", po::value<std::string>(&q.out),
                          "the sweep's output folder (default: runs/<name>)")(
        "jobs", po::value<std::string>(&q.jobs_text),
        "worker processes at a time (default 1; each trains with the "
        "sweep's training.threads, 1 unless it sets it)")(
        "dry-run", po::bool_switch(&q.dry_run),
        "list the runs (index, name, status, command) and run nothing; "
        "with --slurm: write the job script, submit nothing")(
        "task", po::value<std::string>(&q.task_text),
        "run only run I (a Slurm array task): resume it, skip it if "
        "done, or start it")("srun", po::bool_switch(&q.srun),
                             "with --task: start the run's ranks (nodes x ntasks_per_node) with srun, "
                             "inside their Slurm allocation (sweep --slurm's job scripts do)")(
        "slurm", po::bool_switch(&q.slurm), "submit the runs not yet done as a Slurm job array (sbatch)")(
        "slurm-args", po::value<std::string>(&q.slurm_args),
        "with --slurm: arguments for sbatch, e.g. "
        "\"--partition=gpu --time=2:00:00\"");
    po::positional_options_description pos;
    pos.add("sweep", 1);
    po::variables_map vm;
    const command_help help{
        "sweep",
        {"[--plugins DIR] sweep SWEEP.toml [--out DIR] [--jobs N] [--dry-run]",
         "[--plugins DIR] sweep SWEEP.toml [--out DIR] --task I [--srun]",
         "[--plugins DIR] sweep SWEEP.toml [--out DIR] --slurm [--slurm-args \"ARGS\"] [--dry-run]"},
        "altgrad-host --plugins build/plugins sweep sweeps/formats.toml --jobs 2",
        {{0, "every run finished or collapsed (with --slurm: sbatch's status; with --dry-run: listed)"},
         {1,
          "an error (a bad sweep file or config: nothing ran), or some runs failed: they are listed with "
          "their logs"},
         {run::kInterruptedExitCode,
          "SIGINT (Ctrl-C) or SIGTERM stopped the sweep: the running runs wrote "
          "checkpoints; the same command continues it"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return false;
    if (q.file.empty()) throw usage_error("sweep: give a SWEEP.toml");
    q.jobs = unsigned_option("sweep", "jobs", q.jobs_text);
    if (q.jobs < 1 || q.jobs > 1024) throw usage_error("sweep: --jobs " + q.jobs_text + ": expected 1..1024");
    if (vm.count("slurm-args") && !q.slurm) throw usage_error("sweep: --slurm-args goes with --slurm");
    if (q.srun && !vm.count("task")) throw usage_error("sweep: --srun goes with --task");
    if (vm.count("task") && (q.slurm || q.dry_run || vm.count("jobs")))
        throw usage_error("sweep: --task runs one run: it excludes --slurm, --dry-run and --jobs");
    q.sbatch_args = sweep::split_arguments(q.slurm_args);
    q.task = vm.count("task") != 0;
    return true;
}

// The sweep's runs and where each stands.
struct sweep_state {
    sweep::sweep_spec spec;
    std::vector<sweep::sweep_run> runs;
    fs::path out_dir, host, plugins;
    std::vector<sweep::run_status> status;  // of each run
    std::vector<size_t> todo;               // the runs not done
    std::string head;                       // "sweep NAME: ", heading our lines on standard error
};

// The sweep file read and its runs planned, each with its status in the output folder.
sweep_state read_sweep(const context& ctx, const sweep_request& q) {
    sweep_state s;
    s.spec = sweep::load_sweep(q.file);
    s.runs = sweep::plan_runs(s.spec);
    s.out_dir = q.out.empty() ? fs::path("runs") / s.spec.name : fs::path(q.out);
    s.host = fs::read_symlink("/proc/self/exe");
    s.plugins = fs::absolute(ctx.plugins).lexically_normal();
    for (const sweep::sweep_run& r : s.runs) {
        s.status.push_back(sweep::status_of(sweep::run_dir(s.out_dir, r)));
        if (!sweep::is_done(s.status.back())) s.todo.push_back(r.index);
    }
    s.head = "sweep " + s.spec.name + ": ";
    return s;
}

// --task I: run I becomes the only one to do; false when it is done already
// (said, and its folder printed).
bool take_task(const sweep_request& q, sweep_state& s) {
    const uint64_t i = unsigned_option("sweep", "task", q.task_text);
    if (i >= s.runs.size())
        throw usage_error("sweep: --task " + q.task_text + ": " + q.file + " has runs 0.." +
                          std::to_string(s.runs.size() - 1));
    if (sweep::is_done(s.status[i])) {
        std::cerr << s.head << "run " << i << " " << s.runs[i].name << ": already "
                  << sweep::status_name(s.status[i]) << "\n";
        std::cout << sweep::run_dir(s.out_dir, s.runs[i]).string() << "\n";
        return false;
    }
    s.todo = {static_cast<size_t>(i)};
    return true;
}

// --slurm: a job array of the runs not done per rank layout (each array's
// tasks get its nodes and tasks per node), written and submitted unless
// --dry-run; the exit code (the first sbatch that failed).
int submit_to_slurm(const sweep_request& q, const sweep_state& s) {
    if (s.todo.empty()) {
        std::cerr << s.head << "nothing left to run: all " << s.runs.size()
                  << " runs are finished or collapsed; nothing submitted\n";
        return 0;
    }
    std::map<sweep::rank_layout, std::vector<size_t>> by_layout;
    for (const size_t i : s.todo) by_layout[s.runs[i].layout].push_back(i);
    const fs::path sweep_file = fs::absolute(q.file).lexically_normal();
    const fs::path out = fs::absolute(s.out_dir).lexically_normal();
    fs::create_directories(sweep::script_file(out, {}).parent_path());
    fs::create_directories(out / "logs");  // Slurm does not create --output's folder
    int status = 0;
    for (const auto& [layout, tasks] : by_layout) {
        const sweep::slurm_job job{s.spec.name, tasks, s.host, s.plugins, sweep_file, out, layout};
        const fs::path script = sweep::script_file(out, layout);
        run::write_file_atomically(script, sweep::sbatch_script(job));
        std::cerr << s.head << tasks.size() << " of " << s.runs.size() << " runs to submit (array "
                  << sweep::array_list(tasks) << ", " << layout.nodes << " node(s) x "
                  << layout.ntasks_per_node << " rank(s) each), job script " << script.string() << "\n";
        if (!q.dry_run && status == 0) status = submit(q.sbatch_args, script);
    }
    return status;
}

// --dry-run: a line per run (index, name, status, the command that would run it).
void list_runs(const sweep_state& s) {
    size_t width = 0;
    for (const sweep::sweep_run& r : s.runs) width = std::max(width, r.name.size());
    for (const sweep::sweep_run& r : s.runs) {
        const sweep::run_status st = s.status[r.index];
        const std::vector<std::string> argv = sweep::run_command(s.host, s.plugins, s.out_dir, r, st);
        std::cout << std::left << std::setw(4) << r.index << " " << std::setw(static_cast<int>(width))
                  << r.name << "  " << std::setw(11) << sweep::status_name(st) << " "
                  << (sweep::is_done(st) ? "(skipped: done)" : sweep::shell_words(argv)) << "\n";
    }
}

// The runs to do in a local pool of workers, then what became of them; the exit code.
int run_locally(const sweep_request& q, const sweep_state& s) {
    sweep::pool_options o;
    o.host = s.host;
    o.plugins = s.plugins;
    o.out = s.out_dir;
    o.jobs = static_cast<size_t>(q.jobs);
    o.live = ::isatty(STDERR_FILENO) != 0;
    fs::create_directories(s.out_dir / "logs");
    if (q.task) o.jobs = 1;
    o.launcher = q.srun ? sweep::rank_launcher::srun : sweep::rank_launcher::local;
    const sweep::pool_result result = sweep::run_pool(s.spec.name, s.runs, s.todo, o, std::cerr);
    std::cout << (q.task ? sweep::run_dir(s.out_dir, s.runs[s.todo[0]]) : s.out_dir).string() << "\n";
    for (const sweep::failed_run& f : result.failed)
        std::cerr << s.head << "failed: run " << f.run->index << " " << f.run->name << " (" << f.why
                  << "), log " << sweep::log_file(s.out_dir, *f.run).string() << "\n";
    if (result.stop_signal != 0) {
        std::vector<std::string> again = {s.host.string(), "--plugins", s.plugins.string(), "sweep",
                                          q.file,          "--out",     s.out_dir.string()};
        if (q.task) again.insert(again.end(), {"--task", q.task_text});
        else if (q.jobs != 1) again.insert(again.end(), {"--jobs", std::to_string(q.jobs)});
        std::cerr << s.head << run::signal_name(result.stop_signal)
                  << ": stopped; the interrupted runs have checkpoints; continue with the same command: "
                  << sweep::shell_words(again) << "\n";
        return run::kInterruptedExitCode;
    }
    return result.failed.empty() ? 0 : 1;
}

}  // namespace

int sweep_command(const context& ctx, const args& a) {
    sweep_request q;
    if (!read_request(a, q)) return 0;
    sweep_state s = read_sweep(ctx, q);
    if (!q.dry_run || q.slurm) sweep::mark_sweep_folder(s.out_dir, q.file);
    if (q.task) {
        if (!take_task(q, s)) return 0;
    } else if (q.slurm) {
        return submit_to_slurm(q, s);
    } else if (q.dry_run) {
        list_runs(s);
        return 0;
    }
    return run_locally(q, s);
}

}  // namespace altgrad::host::cli
