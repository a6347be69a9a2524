// `altgrad-host report`: run directories in, one markdown report with figures
// out (docs/report.md describes every section). The pieces are public so the
// tests can check each against synthetic runs.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report/run_record.hpp"

namespace altgrad::host::report {

struct report_options {
    fs::path out_dir = "report";  // gets report.md and figures/
    std::string gnuplot = "gnuplot";
    bool figures = true;
};

struct report_output {
    fs::path markdown;
    size_t figures = 0;           // images made
    std::string figures_missing;  // why there are none or fewer, empty when all were made
};

// A configuration's runs (its seeds) and what they add up to.
struct group_summary {
    std::string name, formats;
    std::vector<const run_record*> runs;
    size_t finished = 0, decided = 0, failed = 0, interrupted = 0;
    std::vector<double> final_val;  // finished runs with a finite final validation loss
    double mean = 0, sd = 0;        // of final_val (sd: sample; 0 for one run)
    bool baseline = false;          // the BF16 baseline
};

// Runs grouped by config name, in order of first appearance, the baseline marked.
std::vector<group_summary> group_runs(const std::vector<run_record>& runs);

struct hypothesis_verdict {
    std::string format;      // "E7M0"
    std::string hypothesis;  // as the seeds put it, with the threshold that decides it
    std::string observed;    // the numbers
    std::string verdict;     // "supported" | "contradicted" | "not tested by these runs"
};

// The seeds' failure-mode hypotheses, each judged from `runs`.
std::vector<hypothesis_verdict> judge_hypotheses(const std::vector<run_record>& runs);

// A run's row of the runs table (markdown, no newline); links relative to out_dir.
std::string run_row(const run_record& r, const fs::path& out_dir);
// The header of that table (two lines, no final newline).
std::string run_table_header();

// Writes out_dir/report.md and out_dir/figures/. Throws host::error only when
// out_dir or report.md cannot be written; figure failures are said in the report.
report_output write_report(const std::vector<run_record>& runs, const report_options& options);

}  // namespace altgrad::host::report
