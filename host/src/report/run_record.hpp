// One run directory (docs/training.md, "The run directory") read into what
// `altgrad-host report` shows about it. Reading never throws for what is in
// the folder: a missing, unreadable or half-written file becomes a line in
// `problems` and the record holds what could be read.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "run/records.hpp"

namespace altgrad::host::report {

namespace fs = std::filesystem;

struct point {
    int64_t step = 0;
    double value = 0;  // NaN where the run wrote null (a non-finite value)
    bool operator==(const point& o) const { return step == o.step && value == o.value; }
};

// The largest rate seen of one kind, and where.
struct peak {
    double rate = -1;  // < 0: never measured
    std::string tensor;
    int64_t step = -1;
    bool measured() const { return rate >= 0; }
    void offer(double r, const std::string& t, int64_t s);
};

using run::format_switch;

// One quantized tensor over time: its `tensor` lines, by step (the per-layer figures).
struct tensor_series {
    std::string role;                     // "weight", "activation", "output_gradient"
    std::vector<run::tensor_line> lines;  // amax, scale (NaN when block-scaled), blocks.* (block-scaled only)
    // `metric`'s value at each line's step (NaN where a line lacks it).
    std::vector<point> of(const std::string& metric) const;
};

struct run_record {
    fs::path dir;
    std::string name;    // the config's name (else summary.json's, else the folder's)
    std::string run_id;  // summary.json's or metrics.jsonl's (empty for runs of hosts before run ids)

    // From summary.json, else config.toml, else metrics.jsonl.
    std::optional<int64_t> seed, max_steps, steps_done;

    // Formats at the start of the run. `formats` is for people ("e5m2"; "bf16;
    // blocks.*.mlp.fc: a e1m6"); `uniform_format` is the one format of every
    // quantized tensor, empty when the layers or directions differ or it is not known.
    std::string formats;
    std::string uniform_format;
    std::vector<format_switch> switches;  // made during the run

    // "finished", "collapsed", "error", "crashed", "interrupted" (summary.json's
    // status), or "interrupted" without summary.json (killed, or still running).
    std::string status = "interrupted";
    bool has_summary = false;
    std::string failure_mode;  // summary.json's ("none" when it did not fail); empty without one
    std::optional<int64_t> failure_step;
    std::string failure_evidence;
    // The run metrics (the catalog's record summary: final_train_loss,
    // final_val_loss, best_val_loss, seconds, cpu_seconds): summary.json's,
    // else the losses from metrics.jsonl. Absent: unknown; NaN: not finite. A
    // time summary.json wrote null is unknown.
    run::metric_values run_metrics;
    std::optional<double> run_metric(const std::string& name) const { return run_metrics.find(name); }
    run::corpus_record corpus;  // summary.json's n-gram references (NaN: not recorded)
    std::map<std::string, std::map<std::string, int64_t>> interventions;  // plugin -> event -> count
    std::optional<int64_t> last_checkpoint;       // newest complete checkpoints/step_N
    std::optional<int64_t> first_nonfinite_step;  // first step whose loss was written null
    fs::path failure_report;                      // reports/failure.md when it exists
    int64_t repeated_steps = 0;                   // steps written twice (a resume); the last line kept

    // The resolved configuration (config.toml through the config loader, every
    // default filled in) as dotted key -> TOML value, without what does not
    // change the experiment: the seed, the name, training.threads and output.*.
    // Runs with equal settings are seeds of one experiment. Empty when the
    // loader refused config.toml (or there is none).
    std::map<std::string, std::string> settings;

    std::vector<std::string> problems;  // one line each, without the folder's name

    // The metrics it wrote: its catalog.json (else the host's metrics), and a
    // series for every value of a diagnostic that declared none (a plugin of
    // ABI < 1.3, or a run before catalog.json): "<plugin>.<value>", the mean
    // over tensors.
    run::metric_catalog catalog;
    // Every series of the catalog, by its name: a stored metric's every value
    // written (NaN where null), a derived one's where it has a value.
    std::map<std::string, std::vector<point>> series;
    const std::vector<point>& train_loss() const { return series_points("train_loss"); }
    const std::vector<point>& val_loss() const { return series_points("val_loss"); }
    std::map<std::string, tensor_series> tensors;  // by tensor name ("blocks.0.mlp.fc.weight")
    std::map<std::string, peak> max_overflow;      // by role: weight, activation, gradient (per tensor)
    peak max_bit_stall;                            // over weight tensors

    // The points of series `name`; none when not measured.
    const std::vector<point>& series_points(const std::string& name) const;

    // A run that reached an outcome: it finished or collapsed (not stopped by an
    // error, a crash or a signal).
    bool decided() const { return has_summary && (status == "finished" || status == "collapsed"); }
    // A decided run that failed (collapsed, or classified with a failure mode).
    bool failed() const {
        return decided() && (status == "collapsed" || (!failure_mode.empty() && failure_mode != "none"));
    }
};

// The series of `runs`' catalogs, each once (by its series name, the first
// run's description): the host's in its catalog's order, then the others
// (diagnostics' headlines, added metrics) by name. The report's figures and
// steps.csv's columns, in this order.
std::vector<run::metric> series_of_runs(const std::vector<run_record>& runs);

// Whether `dir` looks like a run directory: a folder holding config.toml,
// metrics.jsonl or summary.json.
bool is_run_dir(const fs::path& dir);

// Reads the run directory `dir` (which is_run_dir). Missing or damaged files
// are problems in the record; host::error when one of them is a folder.
run_record read_run(const fs::path& dir);

}  // namespace altgrad::host::report
