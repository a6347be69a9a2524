// altgrad-host report: read run directories (finished, collapsed or
// interrupted) and write a markdown report with figures (docs/report.md).
// Exit 2 for no run directory or a path that is not one; 1 for a bad
// hypotheses file, a folder where a run's file belongs, or when the report
// cannot be written. Damaged runs are lines in the report, not errors.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "report/report.hpp"
#include "report/run_record.hpp"
#include "sweep/run_state.hpp"
#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::cli {

namespace rep = altgrad::host::report;

namespace {

// The run directories among `dirs` (a sweep's logs/ and slurm/ left out), each checked to be one.
std::vector<std::string> run_dirs_of(std::vector<std::string> dirs) {
    // `report OUT/*/` over a sweep's folder names its logs/ and slurm/ too.
    dirs.erase(std::remove_if(dirs.begin(), dirs.end(),
                              [](const std::string& d) { return sweep::is_sweep_housekeeping(d); }),
               dirs.end());
    if (dirs.empty())
        throw usage_error(
            "report: no run directories among the folders given (only a sweep's logs/ and slurm/)");
    for (const std::string& d : dirs) {
        std::error_code ec;
        if (!std::filesystem::exists(d, ec)) throw usage_error("report: " + d + ": no such run directory");
        if (!std::filesystem::is_directory(d, ec))
            throw usage_error("report: " + d + ": not a folder (expected a run directory)");
        if (!rep::is_run_dir(d))
            throw usage_error("report: " + d +
                              ": not a run directory (no config.toml, metrics.jsonl or summary.json)");
    }
    return dirs;
}

}  // namespace

int report_command(const context&, const args& a) {
    po::options_description options("report options");
    std::vector<std::string> dirs;
    rep::report_options o;
    std::string out_dir, hypotheses_file;
    options.add_options()(
        "out,o", po::value<std::string>(&out_dir)->default_value("report"),
        "the report folder: report.md and figures/ (made if missing; files in it are replaced)")(
        "hypotheses", po::value<std::string>(&hypotheses_file),
        "the failure-mode hypotheses to judge (TOML, docs/report.md; default: the seeds', "
        "configs/hypotheses/seeds.toml)")("gnuplot",
                                          po::value<std::string>(&o.gnuplot)->default_value("gnuplot"),
                                          "the gnuplot program that draws the figures")(
        "gnuplot-timeout", po::value<double>(&o.gnuplot_timeout)->default_value(60),
        "seconds gnuplot may take over one figure; then it is killed and the figures left are not drawn")(
        "baseline", po::value<std::string>(&o.baseline)->default_value(rep::kDefaultBaseline),
        "the config (its name) every group is compared with; several groups of it: each group with the one "
        "that shares the most of its settings")("no-figures", "write the report without figures")(
        "seed-curves", "beside each group's loss figure (the mean of its seeds), one of each seed's curves")(
        "summary-figures-only", "of the figures, draw only the summary's forest plots");
    po::options_description operands;
    operands.add_options()("run", po::value<std::vector<std::string>>(&dirs));
    po::positional_options_description pos;
    pos.add("run", -1);
    po::variables_map vm;
    const command_help help{
        "report",
        {"report RUN_DIR... [-o OUT_DIR] [--baseline CONFIG] [--hypotheses FILE] [--gnuplot PROGRAM] "
         "[--gnuplot-timeout SECONDS] [--no-figures] [--seed-curves] [--summary-figures-only]"},
        "altgrad-host report runs/e5m2_short runs/bf16_baseline -o report",
        {{0, "the report was written (damaged runs are notes in it, not errors)"},
         {1,
          "an error: a bad hypotheses file, a folder in place of a run's file, the report folder cannot be "
          "written, or figures were asked for and gnuplot cannot draw them or runs past --gnuplot-timeout "
          "(the report is written without them)"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (dirs.empty()) throw usage_error("report: give one or more run directories");
    if (!(o.gnuplot_timeout > 0 && std::isfinite(o.gnuplot_timeout)))
        throw usage_error("report: --gnuplot-timeout " + shortest_decimal(o.gnuplot_timeout) +
                          ": expected a number of seconds > 0");
    o.out_dir = out_dir;
    o.figures = vm.count("no-figures") == 0;
    o.seed_curves = vm.count("seed-curves") > 0;
    o.summary_figures_only = vm.count("summary-figures-only") > 0;

    // Read before the runs: a bad hypotheses file stops the report before any work.
    o.judged = rep::load_hypotheses(hypotheses_file.empty() ? rep::default_hypotheses_file()
                                                            : std::filesystem::path(hypotheses_file));

    std::vector<rep::run_record> runs;
    for (const std::string& d : run_dirs_of(dirs)) runs.push_back(rep::read_run(d));
    if (!vm["baseline"].defaulted()) {  // a --baseline given must name the config of some run given
        const std::string missing = rep::baseline_missing(runs, o.baseline);
        if (!missing.empty()) throw usage_error("report: --baseline " + o.baseline + ": " + missing);
    }

    const rep::report_output out = rep::write_report(runs, o);
    size_t problems = 0;
    for (const rep::run_record& r : runs) problems += r.problems.size();
    std::cout << "report: " << out.markdown.string() << " (" << runs.size()
              << (runs.size() == 1 ? " run, " : " runs, ") << out.figures
              << (out.figures == 1 ? " figure" : " figures") << ")\n";
    if (out.gnuplot_unavailable) {
        // The figures were asked for: a report silently without them would pass for a complete one.
        std::cerr << "altgrad-host: error: no figures: " << out.figures_missing
                  << "; the report is written without them (--no-figures asks for none)\n";
        return 1;
    }
    if (out.gnuplot_timed_out) {
        std::cerr << "altgrad-host: error: figures: " << out.figures_missing
                  << "; the report is written without them (--gnuplot-timeout sets the limit)\n";
        return 1;
    }
    if (!out.figures_missing.empty()) std::cout << "figures: " << out.figures_missing << "\n";
    if (problems > 0)
        std::cout << problems << " note(s) on missing or damaged files: see the report's Runs section\n";
    return 0;
}

}  // namespace altgrad::host::cli
