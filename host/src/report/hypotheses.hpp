// The failure-mode hypotheses a report judges, as a hypotheses file states
// them (docs/report.md, "The hypotheses file"), and the reading of that file.
// report.hpp judges them against runs (judge_hypotheses).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

namespace altgrad::host::report {

namespace fs = std::filesystem;

// One failure-mode hypothesis the report judges: a claim about the runs that
// use `format` for every quantized tensor, and the test that decides it. Read
// from a hypotheses file (docs/report.md, "The hypotheses file"; the seeds'
// are configs/hypotheses/seeds.toml).
struct hypothesis {
    enum class test_kind {
        failure_rate,  // the fraction of runs that failed lies in the bounds
        overflow,  // a tensor of `roles` overflowed on more than `rate` of its elements, or a run failed by
                   // overflow
        failure_mode,  // every failure is of `mode`, in at most `at_most` of the runs
    };
    std::string format;  // format plugin name, e.g. "e7m0"
    std::string claim;   // as shown in the report, with the threshold that decides it
    test_kind test = test_kind::failure_rate;
    double lower = 0;                        // failure_rate: the lower bound ...
    bool lower_inclusive = true;             // ... at_least (inclusive) or more_than (exclusive)
    double at_most = 1;                      // failure_rate and failure_mode: the upper bound (inclusive)
    std::vector<altgrad_tensor_role> roles;  // overflow: weight, activation, output_gradient
    double rate = 0.1;                       // overflow
    std::string mode;                        // failure_mode: a failure mode name, e.g. "bit_stall"
};

struct hypotheses {
    std::string source;             // who put them forward (the file's `source`), shown in the report
    std::filesystem::path file;     // where they were read from
    std::vector<hypothesis> items;  // in file order
};

// Reads a hypotheses file; throws host::error with one line naming the file
// and the key ("hypotheses.toml: key 'hypothesis[2].test': expected one of ...").
hypotheses load_hypotheses(const fs::path& file);
// The same from text; `source_name` stands for the file in errors.
hypotheses parse_hypotheses(const std::string& toml_text, const std::string& source_name);

// The hypotheses file a report uses when none is given: the seeds' hypotheses
// (configs/hypotheses/seeds.toml), copied next to the host in a build tree
// (hypotheses/seeds.toml) and installed in share/altgrad/hypotheses/.
fs::path default_hypotheses_file();

}  // namespace altgrad::host::report
