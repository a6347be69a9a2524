// The run's history as summary.json and the failure report need it (format
// switches, intervention counts, events, the recent trend and diagnostics),
// and its JSON form in checkpoints, so a resumed run reports the whole run.
// No LibTorch here.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "stability/failure_report.hpp"  // trend_row, diagnostic_mean

namespace altgrad::host::train {

// One tensor moved from one format to another (by an intervention).
struct format_switch {
    std::string tensor, from, to;
};

// What summary.json and the failure report need of the run's history.
struct run_history {
    struct switch_record {
        int64_t step;
        std::string plugin;
        format_switch what;
    };
    std::vector<switch_record> switches;
    std::map<std::string, std::map<std::string, int64_t>> interventions;  // plugin -> action kind -> count
    std::vector<std::string> events;                                        // one line each, for the report
    std::deque<stability::trend_row> trend;                                 // the last steps
    std::deque<stability::diagnostic_mean> diagnostics;                     // the last snapshots
};

// "switches": [...], "interventions": {...}: as summary.json has them.
void write_switches_and_interventions(std::ostream& o, const run_history& h);

// The history as JSON, for checkpoints. Non-finite numbers become null and
// come back as NaN.
std::string history_json(const run_history& h);

// history_json's text back; throws host::error naming `where` when it is not.
run_history history_from_json(const std::string& text, const std::string& where);

}  // namespace altgrad::host::train
