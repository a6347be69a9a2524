// `altgrad-host report`: run directories in, one markdown report with figures
// out (docs/report.md describes every section). The pieces are public so the
// tests can check each against synthetic runs.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "report/hypotheses.hpp"
#include "report/run_record.hpp"
#include "report/stats.hpp"

namespace altgrad::host::report {

// The config whose groups are the baselines unless --baseline names another.
inline constexpr const char* kDefaultBaseline = "bf16_baseline";

struct report_options {
    fs::path out_dir = "report";  // gets report.md and figures/
    std::string gnuplot = "gnuplot";
    // Seconds per gnuplot run; then it is killed, and past a figure the rest are not tried.
    double gnuplot_timeout = 60;
    bool figures = true;
    // Beside each group's loss figure (the mean of its seeds), one of each seed's curves (--seed-curves).
    bool seed_curves = false;
    // Of the figures, only the summary's forest plots (--summary-figures-only): a second report over
    // runs another report draws already.
    bool summary_figures_only = false;
    hypotheses judged;  // the hypotheses section; none: the section says so
    // The config whose groups are the baselines (--baseline): "bf16_baseline" by default, and then,
    // when no run has that name, the groups that are BF16 throughout.
    std::string baseline = kDefaultBaseline;
};

struct report_output {
    fs::path markdown;
    size_t figures = 0;                // images made
    std::string figures_missing;       // why there are none or fewer, empty when all were made
    bool gnuplot_unavailable = false;  // figures were asked for and gnuplot cannot draw any
    // gnuplot ran past report_options::gnuplot_timeout on a figure: the figures
    // after it were not tried, and figures_missing names it and the limit.
    bool gnuplot_timed_out = false;
};

// An experiment: runs whose resolved configurations are equal but for the
// seed (run_record::settings), and what they add up to. Runs whose config
// could not be read are grouped by name, and said so.
inline constexpr size_t kNoGroup = static_cast<size_t>(-1);

struct group_summary {
    std::string name;  // the config name of its runs (names joined by ", " when they differ)
    // Unique among the groups: the name; where groups share it, the name and the settings in which they
    // differ ("e3m4_uniform [scaling=none, shadow_weights=true]"); "name (config unknown)"; then " (2)", ...
    std::string label;
    std::string formats;
    std::map<std::string, std::string> settings;  // of its runs; empty: unknown (grouped by name)
    std::vector<const run_record*> runs;
    size_t finished = 0, decided = 0, failed = 0, interrupted = 0;
    std::vector<double> final_val;  // finished runs with a finite final validation loss
    sample_summary val;             // of final_val: n, mean, sample sd, 95% CI
    welch_result
        vs_baseline;  // mean - its baseline's mean, Welch's t-test (NaN: no baseline, or too few runs)
    // Against its baseline, run by run where the two share a seed (finished runs with a finite loss):
    // the paired differences and their t-test. n = 0 when no seed is shared.
    paired_result vs_baseline_paired;
    bool baseline = false;  // a baseline: of report_options::baseline's config (by default BF16)
    // The index of the baseline group it is compared with: the baseline whose settings agree with its
    // own on the most keys; a baseline's own index; kNoGroup when there is no baseline.
    size_t compared_with = kNoGroup;
};

// Runs grouped by resolved configuration without the seed, in order of first
// appearance, the baselines marked and every other group compared with the
// baseline that shares the most of its settings.
// `baseline`: the config name of the baselines (report_options::baseline).
std::vector<group_summary> group_runs(const std::vector<run_record>& runs,
                                      const std::string& baseline = kDefaultBaseline);

// Empty when some run of `runs` is of config `baseline`; else why it names none: "no run of that config
// among the runs given (their configs: 'e5m2_short', 'bf16_baseline')".
std::string baseline_missing(const std::vector<run_record>& runs, const std::string& baseline);

// The settings whose values differ between groups (a key some group lacks counts), in key order.
std::vector<std::string> varying_settings(const std::vector<group_summary>& groups);

struct hypothesis_verdict {
    std::string format;      // "E7M0"
    std::string hypothesis;  // the claim, as the hypotheses file puts it
    std::string observed;    // the numbers
    // "supported" | "contradicted" | "inconclusive" | "not enough runs (n=2)" | "not tested by these runs"
    std::string verdict;
    std::string group;  // the group (group_summary::label) judged; empty when none was
};

// The runs a verdict needs per group: fewer decide nothing.
inline constexpr size_t kRunsForVerdict = 3;

// Each hypothesis judged for each group whose runs all use its format for
// every tensor (one row per hypothesis and group), in order. Rates are
// judged by their exact 95% (Clopper-Pearson) interval: supported when it
// lies within the bounds, contradicted when it lies outside, else inconclusive.
std::vector<hypothesis_verdict> judge_hypotheses(const std::vector<run_record>& runs,
                                                 const std::vector<hypothesis>& items);

// A run's row of the runs table (markdown, no newline); links relative to out_dir.
std::string run_row(const run_record& r, const fs::path& out_dir);
// The header of that table (two lines, no final newline).
std::string run_table_header();

// Writes out_dir/report.md and out_dir/figures/. Throws host::error only when
// out_dir or report.md cannot be written; figure failures are said in the report.
report_output write_report(const std::vector<run_record>& runs, const report_options& options);

}  // namespace altgrad::host::report
