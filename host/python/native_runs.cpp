// Run directories and studies for Python: the report room's readers
// (report/run_record.hpp, report/summary.hpp), their results as dicts and text.
#include "native_runs.hpp"

#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/run_record.hpp"
#include "report/summary.hpp"
#include "run/catalog.hpp"
#include "util/error.hpp"

namespace py = pybind11;

namespace altgrad::host::python {

namespace {

// A metric's description as a dict (catalog.json's fields, run/catalog.hpp).
py::dict metric_dict(const run::metric& m) {
    py::dict d;
    d["name"] = m.name;
    d["record"] = run::metric_record_names().name(m.record);
    d["scope"] = run::metric_scope_names().name(m.scope);
    d["type"] = run::metric_type_names().name(m.type);
    d["unit"] = m.unit;
    d["source"] = m.source;
    d["title"] = m.title;
    d["series"] = m.series;
    d["label"] = m.label;
    d["summary"] = run::tensor_summary_names().name(m.summary);
    d["summary_of"] = m.summary_of;
    d["log_scale"] = m.log_scale;
    d["required"] = m.required;
    d["timing"] = m.timing;
    return d;
}

// A run directory as the report reads it: its catalog, its series (the
// columns of steps.csv: step, then one per series, NaN where not measured)
// and what could not be read.
py::dict read_run_series(const std::string& dir) {
    report::run_record r;
    {
        py::gil_scoped_release unlocked;
        r = report::read_run(dir);
    }
    py::list catalog;
    for (const run::metric& m : r.catalog.metrics()) catalog.append(metric_dict(m));
    std::vector<run::metric> series = report::series_of_runs({r});
    std::map<int64_t, std::vector<double>> rows;
    for (size_t k = 0; k < series.size(); ++k)
        for (const report::point& p : r.series_points(series[k].series)) {
            std::vector<double>& row = rows[p.step];
            row.resize(series.size(), NAN);
            row[k] = p.value;
        }
    py::list columns, steps, values;
    for (const run::metric& m : series) columns.append(m.series);
    for (auto& [step, row] : rows) {
        row.resize(series.size(), NAN);
        steps.append(step);
        values.append(py::cast(row));
    }
    py::dict d;
    d["catalog"] = catalog;
    d["columns"] = columns;
    d["steps"] = steps;
    d["values"] = values;
    d["problems"] = py::cast(r.problems);
    return d;
}

// The summary of the study of run directories `dirs` against the groups of config `baseline`: the
// text of the report's summary.csv (docs/report.md, "Summary").
std::string study_summary_csv(const std::vector<std::string>& dirs, const std::string& baseline) {
    py::gil_scoped_release unlocked;
    std::vector<report::run_record> runs;
    for (const std::string& dir : dirs) {
        if (!report::is_run_dir(dir))
            throw error(dir + ": not a run directory (no config.toml, metrics.jsonl or summary.json)");
        runs.push_back(report::read_run(dir));
    }
    if (baseline != report::kDefaultBaseline) {
        const std::string missing = report::baseline_missing(runs, baseline);
        if (!missing.empty()) throw error("baseline '" + baseline + "': " + missing);
    }
    const std::vector<report::group_summary> groups = report::group_runs(runs, baseline);
    return report::summary_csv(report::summary_rows(groups));
}

}  // namespace

void bind_runs(py::module_& m) {
    m.def("host_metrics", [] {
        py::list out;
        for (const run::metric& x : run::host_metrics()) out.append(metric_dict(x));
        return out;
    });
    m.def("read_run_series", &read_run_series, py::arg("run_dir"));
    m.def("study_summary_csv", &study_summary_csv, py::arg("run_dirs"), py::arg("baseline"));
}

}  // namespace altgrad::host::python
