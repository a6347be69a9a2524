#include "report/tables.hpp"

#include <cmath>
#include <map>
#include <optional>

#include "util/numbers.hpp"

namespace altgrad::host::report {

namespace {

std::string number(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    return shortest_decimal(x);
}

std::string number(const std::optional<double>& x) { return x ? number(*x) : ""; }
std::string integer(const std::optional<int64_t>& x) { return x ? std::to_string(*x) : ""; }

std::string row(const std::vector<std::string>& fields) {
    std::string out;
    for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
    return out + "\n";
}

std::string run_name(const run_record& r) {
    std::string s = r.dir.generic_string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
}

// Each run's group label.
std::map<const run_record*, const group_summary*> group_of(const std::vector<group_summary>& groups) {
    std::map<const run_record*, const group_summary*> out;
    for (const group_summary& g : groups)
        for (const run_record* r : g.runs) out[r] = &g;
    return out;
}

}  // namespace

std::string csv_field(const std::string& text) {
    const bool quote = text.find_first_of(",\"\r\n") != std::string::npos ||
                       (!text.empty() && (text.front() == ' ' || text.back() == ' '));
    if (!quote) return text;
    std::string out = "\"";
    for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string runs_csv(const std::vector<run_record>& runs, const std::vector<group_summary>& groups) {
    const auto group = group_of(groups);
    const std::vector<std::string> varying = varying_settings(groups);
    // The catalog's run metrics: what the run measured before its comparison, what it cost (timing) after.
    std::vector<std::string> measured, cost;
    for (const run::metric* m : run::host_catalog().of_record(run::metric_record::summary))
        (m->timing ? cost : measured).push_back(m->name);
    std::vector<std::string> header = {"run", "run_id", "group", "config", "seed"};
    header.insert(header.end(), varying.begin(), varying.end());
    for (const char* h :
         {"formats", "uniform_format", "status", "failure_mode", "failure_step", "steps_done", "max_steps"})
        header.push_back(h);
    header.insert(header.end(), measured.begin(), measured.end());
    header.insert(header.end(), {"baseline", "baseline_group"});
    header.insert(header.end(), cost.begin(), cost.end());
    std::string out = row(header);
    for (const run_record& r : runs) {
        const group_summary& g = *group.at(&r);
        std::vector<std::string> f = {run_name(r), r.run_id, g.label, r.name, integer(r.seed)};
        for (const std::string& key : varying) {
            const auto it = r.settings.find(key);
            f.push_back(it == r.settings.end() ? "" : it->second);
        }
        for (const std::string& x : {r.formats, r.uniform_format, r.status, r.failure_mode,
                                     integer(r.failure_step), integer(r.steps_done), integer(r.max_steps)})
            f.push_back(x);
        for (const std::string& name : measured) f.push_back(number(r.run_metric(name)));
        f.push_back(g.baseline ? "true" : "false");
        f.push_back(g.compared_with == kNoGroup || g.baseline ? std::string()
                                                              : groups[g.compared_with].label);
        for (const std::string& name : cost) f.push_back(number(r.run_metric(name)));
        out += row(f);
    }
    return out;
}

std::string steps_csv(const std::vector<run_record>& runs, const std::vector<group_summary>& groups) {
    const auto group = group_of(groups);
    const std::vector<run::metric> series = series_of_runs(runs);
    std::vector<std::string> header = {"run", "group", "step"};
    for (const run::metric& m : series) header.push_back(m.series);
    std::string out = row(header);
    for (const run_record& r : runs) {
        std::map<int64_t, std::vector<std::string>> by_step;  // step -> the value columns
        for (size_t column = 0; column < series.size(); ++column)
            for (const point& p : r.series_points(series[column].series)) {
                auto& cells = by_step[p.step];
                cells.resize(series.size());
                cells[column] = number(p.value);
            }
        for (const auto& [step, cells] : by_step) {
            std::vector<std::string> f = {run_name(r), group.at(&r)->label, std::to_string(step)};
            f.insert(f.end(), cells.begin(), cells.end());
            out += row(f);
        }
    }
    return out;
}

}  // namespace altgrad::host::report
