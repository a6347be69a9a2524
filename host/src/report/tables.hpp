// The report's tidy tables, beside report.md: runs.csv (one row per run) and
// steps.csv (one row per run per logged step), for pandas, R or a
// spreadsheet (docs/report.md, "Tables"). Numbers are written exactly
// (shortest round-trip decimal); a non-finite value is "nan", "inf" or
// "-inf", a missing one an empty field.
#pragma once

#include <string>
#include <vector>

#include "report/report.hpp"

namespace altgrad::host::report {

// A CSV field (RFC 4180): quoted when it holds a comma, a quote, a newline
// or leading/trailing space, quotes doubled.
std::string csv_field(const std::string& text);

// runs.csv's text: the run, its group (group_summary::label), the settings
// that vary between the groups (a column each), then what the runs table shows.
std::string runs_csv(const std::vector<run_record>& runs, const std::vector<group_summary>& groups);

// steps.csv's text: run, group, step, then a column per series of the runs'
// catalogs (series_of_runs: train_loss, val_loss, the host's, then the
// diagnostics' headlines), one row per step any of them was logged at.
std::string steps_csv(const std::vector<run_record>& runs, const std::vector<group_summary>& groups);

}  // namespace altgrad::host::report
