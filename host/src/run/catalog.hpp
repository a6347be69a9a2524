// The metric catalog: every metric a run writes, described once (its name,
// where it is stored, its unit and title, whether it is a series of the
// report). The metrics writer writes a record's values in the catalog's order,
// the readers keep every value they find, and the report, its tables
// (steps.csv, runs.csv) and Python's read_run draw and list the series the
// catalog names. A run writes the catalog it used into its run directory
// (catalog.json: the host's metrics and the headline values its diagnostics
// declared), so whatever reads the run later knows what it measured.
//
// Adding a host metric takes its computation (train/step_metrics.cpp for a
// step metric) and one entry in host_metrics() (catalog.cpp); CONTRIBUTING.md
// walks through it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/name_table.hpp"

namespace altgrad::host::run {

// Where a metric's values are stored in the run directory: in the lines of
// metrics.jsonl of one kind ("train", "val", "tensor", "diagnostic") or in
// summary.json. A series derived from another metric (summary_of) names the
// record that metric is stored in.
enum class metric_record { train, val, tensor, diagnostic, summary };
// What one value describes: one step, one tensor at one step, the whole run.
enum class metric_scope { step, tensor, run };
// How a value is written: a number (null when not finite) or a count (an integer >= 0).
enum class metric_type { number, count };
// How the values of one step's tensors become the step's value of a series.
enum class tensor_summary {
    none,                 // the step's own value
    count_weighted_mean,  // sum(value x count) / sum(count) over the tensors that have it
    mean,                 // the all-tensor ("*") value where written, else the mean of the finite values
    max,                  // the all-tensor value where written, else the largest finite value
    min,                  // the all-tensor value where written, else the smallest finite value
};

const name_table<metric_record>& metric_record_names();    // train, val, tensor, diagnostic, summary
const name_table<metric_scope>& metric_scope_names();      // step, tensor, run
const name_table<metric_type>& metric_type_names();        // number, count
const name_table<tensor_summary>& tensor_summary_names();  // none, count_weighted_mean, mean, max, min

struct metric {
    // Its key in its record ("grad_sparsity"; "blocks.saturated": a key of
    // the nested object "blocks"), or a derived series' name ("bit_stall").
    std::string name;
    metric_record record = metric_record::train;
    metric_scope scope = metric_scope::step;
    metric_type type = metric_type::number;
    std::string unit;             // "nats/token", "fraction", "tokens/s", "s", "elements"; "" when none
    std::string source = "host";  // "host", or the diagnostic plugin whose headline it is
    std::string title;            // one line: what it is (a figure's title when it has one)
    // As a series over steps (the report's figures, steps.csv, read_run's
    // steps): its name there, empty when it is none. A stored metric may be a
    // series of its own (loss: train_loss); a derived one is a series of
    // another's values: of `summary_of`, stored in `record`, one value per
    // step by `summary` (a diagnostic's headline: of its value of that name).
    std::string series;
    std::string label;  // the figure's axis label; empty: no figure of its own
    tensor_summary summary = tensor_summary::none;
    std::string summary_of;  // derived: the metric it is drawn from; empty: stored under `name`
    bool log_scale = false;  // the figure's axis
    bool required = false;   // a reader refuses a record without it (every host wrote it)
    bool timing = false;     // wall-clock time: differs between two runs of the same config

    bool derived() const { return !summary_of.empty(); }
    bool figure() const { return !series.empty() && !label.empty(); }
    // The stored metric the series' values come from.
    const std::string& source_metric() const { return derived() ? summary_of : name; }
};

// The host's own metrics, in the order they are written and shown.
const std::vector<metric>& host_metrics();

// A run's catalog: the host's metrics, then what the run added (diagnostics'
// headline values, a caller's own step metrics).
class metric_catalog {
public:
    metric_catalog() : metrics_(host_metrics()) {}
    explicit metric_catalog(std::vector<metric> metrics) : metrics_(std::move(metrics)) {}

    // Appends `m`; host::error when its series or (record, source, name) is taken.
    void add(const metric& m);
    const std::vector<metric>& metrics() const { return metrics_; }
    // The metrics stored in `record` (not the derived series), in order.
    std::vector<const metric*> of_record(metric_record record) const;
    // The metric stored in `record` under `name`, nullptr when none.
    const metric* stored(metric_record record, std::string_view name) const;
    // The metric of a series, nullptr when none.
    const metric* series(std::string_view name) const;

private:
    std::vector<metric> metrics_;
};

// The host's metrics as a catalog (what a reader checks the metrics it knows against).
const metric_catalog& host_catalog();

// Values by metric name, for one record. Absent: not measured (no key is
// written); NaN: measured but not finite (written as null).
class metric_values {
public:
    metric_values() = default;
    metric_values(std::initializer_list<std::pair<std::string, double>> values) : values_(values) {}
    void set(std::string_view name, double value);
    std::optional<double> find(std::string_view name) const;
    double get(std::string_view name) const;  // NaN when absent
    bool has(std::string_view name) const { return find(name).has_value(); }
    void erase(std::string_view name);
    const std::vector<std::pair<std::string, double>>& entries() const { return values_; }
    bool operator==(const metric_values& o) const { return values_ == o.values_; }

private:
    std::vector<std::pair<std::string, double>> values_;  // in the order first set
};

// One tensor's value of a series' metric at one step, for summarise().
struct tensor_value {
    bool all_tensors = false;  // the diagnostic's "*" entry
    double value = 0;
    double count = 0;  // the tensor's elements (count_weighted_mean)
};
// The step's value of a series from its tensors' values (m.summary); NaN when none counts.
double summarise(const metric& m, const std::vector<tensor_value>& values);

}  // namespace altgrad::host::run
