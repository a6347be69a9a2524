// The answer a study report opens with (docs/report.md, "Summary"): one row
// per group (runs equal but for the seed), its final validation loss and its
// difference from its baseline with a 95% interval, paired by seed where the
// two share seeds, else Welch's; the same rows as summary.csv and as two
// forest plots (the difference, and the relative error in %).
#pragma once

#include <string>
#include <vector>

#include "report/plot.hpp"
#include "report/report.hpp"

namespace altgrad::host::report {

// How a group's difference from its baseline was estimated.
enum class comparison {
    baseline,  // the group is a baseline
    paired,    // over the seeds it shares with its baseline (2 or more): group_summary::vs_baseline_paired
    welch,     // fewer than 2 shared seeds, 2 or more runs on either side: group_summary::vs_baseline
    means,     // the difference of the means only, too few runs for an interval
    none,      // no baseline, or no finished run with a finite loss on one side
};
// "baseline", "paired", "welch", "means", "none": summary.csv's `comparison`.
const char* comparison_name(comparison c);

struct summary_row {
    const group_summary* group = nullptr;
    const group_summary* baseline = nullptr;  // the baseline it is compared with; nullptr: none
    comparison method = comparison::none;
    size_t pairs = 0;  // seeds shared with the baseline (finished, finite loss on both sides)
    // Its mean final validation loss minus the baseline's (paired: the mean of the per-seed differences),
    // the 95% interval and the two-sided p-value; NaN where `method` gives none.
    double difference, ci_low, ci_high, p;
    // The same as a relative error in %: 100 x (the above) / the baseline's mean final validation loss.
    double relative, relative_low, relative_high;
    std::string failures;  // "0/3", "2/3: bit_stall ×2", "—" (none finished or collapsed), "; 1 not counted"
};

// The rows of `groups` (group_runs): the baselines first, then the compared groups by their difference
// (smallest first), then those without one, each set in the groups' order.
std::vector<summary_row> summary_rows(const std::vector<group_summary>& groups);

// The summary table in markdown (a header of two lines, a line per row), with a `baseline` column
// when there are several baselines.
std::string summary_table(const std::vector<summary_row>& rows);

// summary.csv: a row per summary row, in its order (docs/report.md, "Tables").
std::string summary_csv(const std::vector<summary_row>& rows);

// The forest plots of the compared groups (baselines are the zero line): `diff-forest` of the
// differences, `relative-forest` of the relative errors, a row each with its 95% interval; a group whose
// every run failed is a cross at zero. None when no group is compared with a baseline.
std::vector<figure_script> forest_figures(const std::vector<summary_row>& rows);

}  // namespace altgrad::host::report
