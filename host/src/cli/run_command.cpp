// altgrad-host run: train a GPT on a config, every quantized tensor going
// through the format plugins (train/trainer.hpp).
#include <unistd.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "run/supervise.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"

namespace altgrad::host::cli {

int run_command(const context& ctx, const args& a) {
    po::options_description options("run options");
    train::run_request req;
    std::string config, out, resume;
    int nproc = 1;
    po::options_description operands;
    operands.add_options()("config", po::value<std::string>(&config));
    options.add_options()("out", po::value<std::string>(&out),
                          "the run directory (default: <output.dir>/<name>, numbered if taken)")(
        "set", po::value<std::vector<std::string>>(&req.overrides),
        "KEY=VALUE config override (repeatable), "
        "e.g. --set training.max_steps=50")("resume", po::value<std::string>(&resume),
                                            "continue the run in this directory from its last checkpoint")(
        "fallback", po::bool_switch(&req.fallback),
        "with --resume: a damaged newest checkpoint is skipped for the newest intact earlier one")(
        "nproc", po::value<int>(&nproc),
        "N ranks of one data-parallel run on this machine (docs/distributed.md); under torchrun or srun, "
        "leave it out: their environment says where each rank is");
    po::positional_options_description pos;
    pos.add("config", 1);
    po::variables_map vm;
    const command_help help{
        "run",
        {"[--plugins DIR] run CONFIG.toml [--out RUN_DIR] [--set KEY=VALUE]... [--nproc N]",
         "[--plugins DIR] run --resume RUN_DIR [--fallback] [--set KEY=VALUE]... [--nproc N]"},
        "altgrad-host --plugins build/plugins run configs/e5m2_short.toml --set training.max_steps=50",
        {{0, "the run finished all its steps"},
         {1,
          "an error: a bad config, missing data, a broken plugin, or a run directory that cannot be resumed"},
         {3, "the run stopped early: it collapsed (reports/failure.md in the run directory says why)"},
         {run::kCrashedExitCode,
          "the training process crashed (a plugin, or a signal): summary.json names the "
          "plugin and the call; --resume continues from the last checkpoint"},
         {run::kInterruptedExitCode,
          "SIGINT (Ctrl-C) or SIGTERM stopped it after the current step: it wrote a "
          "checkpoint and summary.json (status \"interrupted\"); --resume continues it"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (config.empty() == resume.empty())
        throw usage_error("run: give a CONFIG.toml, or --resume RUN_DIR (not both)");
    if (!resume.empty() && !out.empty()) throw usage_error("run: --out and --resume exclude each other");
    if (req.fallback && resume.empty()) throw usage_error("run: --fallback goes with --resume RUN_DIR");
    req.config = config;
    req.out = out;
    req.resume = resume;
    req.plugins = ctx.plugins;
    // The log and the live progress line go to standard error, so standard
    // output holds only the run directory (`dir=$(altgrad-host ... run ...)`).
    req.live_progress = ::isatty(STDERR_FILENO) != 0;
    if (nproc < 1) throw usage_error("run: --nproc " + std::to_string(nproc) + ": expected 1 or more ranks");
    // Before LibTorch starts threads: the parent only watches (its child, or its ranks).
    if (const std::optional<int> status = nproc > 1 ? run::supervise_ranks(nproc, ctx.plugins, std::cerr)
                                                    : run::supervise_training(ctx.plugins, std::cerr))
        return *status;
    const train::run_result result = train::run_training(req, std::cerr);
    const run::summary_record& s = result.summary;
    if (!result.run_dir.empty()) std::cout << result.run_dir.string() << "\n";
    if (s.status == "interrupted") {
        if (!result.run_dir.empty())  // rank 0's, or the one process's
            std::cerr << "altgrad-host: " << run::signal_name(run::stop_requested())
                      << ": stopped after step " << s.steps_done << " of " << s.max_steps
                      << " with a checkpoint; continue it: altgrad-host --plugins " << ctx.plugins.string()
                      << " run --resume " << result.run_dir.string() << "\n";
        return run::kInterruptedExitCode;
    }
    return s.status == "finished" ? 0 : 3;
}

}  // namespace altgrad::host::cli
