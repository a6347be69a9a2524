#include "report/run_record.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <toml++/toml.h>

#include "config/recipe.hpp"
#include "config/run_config.hpp"
#include "config/writer.hpp"
#include "run/files.hpp"
#include "util/error.hpp"

namespace altgrad::host::report {

std::vector<point> tensor_series::of(const std::string& metric) const {
    std::vector<point> out;
    for (const run::tensor_line& l : lines) out.push_back({l.step, l.values.get(metric)});
    return out;
}

void peak::offer(double r, const std::string& t, int64_t s) {
    if (!std::isfinite(r) || r <= rate) return;
    rate = r;
    tensor = t;
    step = s;
}

namespace {

// The metrics lines a file may repeat (a resume), keyed so the last one wins.
struct metrics_data {
    std::map<int64_t, run::train_line> train;
    std::map<int64_t, run::val_line> val;
    std::map<std::pair<int64_t, std::string>, run::tensor_line> tensors;
    std::map<std::tuple<int64_t, std::string, std::string>, run::diagnostic_line> diagnostics;
    std::map<std::tuple<int64_t, std::string, std::string, std::string>, run::event_line> events;
    std::set<int64_t> repeated;
};

// ---- config.toml ----------------------------------------------------------------

// The operand formats a product table gives ([quantization.forward] x = { format = "bf16" }, a
// rule's weight_gradient = { dy = { format = "e4m3" } }), as "; forward.x bf16".
std::string product_formats(const config::product_configs& products) {
    std::string text;
    for (size_t p = 0; p < config::kProducts; ++p)
        for (size_t k = 0; k < config::kOperands; ++k)
            if (const auto& f = products[p].operands[k].format)
                text += std::string(text.empty() ? "" : ", ") +
                        config::product_names().name(static_cast<config::product_kind>(p)) + "." +
                        config::operand_names().name(static_cast<config::operand_kind>(k)) + " " + *f;
    return text;
}

// The formats as people read them: the global formats ("e5m2", or per
// direction) and the product tables' operand formats, then each rule's
// pattern and what it sets.
void describe_formats(const config::run_config& c, run_record& r) {
    const config::quantization_config& q = c.quantization;
    if (!q.enabled) {
        r.formats = "fp32 (quantization off)";
        r.uniform_format = "fp32";
        return;
    }
    const bool same = q.weight_format == q.activation_format && q.activation_format == q.gradient_format;
    std::string text =
        same ? q.weight_format
             : "w " + q.weight_format + ", a " + q.activation_format + ", g " + q.gradient_format;
    if (const std::string products = product_formats(q.products); !products.empty()) text += "; " + products;
    for (const config::quantization_rule& rule : q.rules) {
        std::string sets;
        auto add = [&](const char* dir, const std::optional<std::string>& f) {
            if (f) sets += std::string(sets.empty() ? "" : ", ") + dir + " " + *f;
        };
        add("w", rule.weight);
        add("a", rule.activation);
        add("g", rule.gradient);
        if (const std::string products = product_formats(rule.products); !products.empty())
            sets += (sets.empty() ? "" : ", ") + products;
        text += "; " + rule.pattern + ": " + sets;
    }
    r.formats = text;
    // Uniform when every operand of every product of every layer resolves to one format.
    const std::vector<std::string> used = config::resolve(c).operand_formats();
    r.uniform_format = used.size() == 1 ? used.front() : "";
}

// Keys of the resolved config that say how a run is bookkept, not what it trains.
bool experiment_key(const std::string& key) {
    return key != "name" && key != "training.seed" && key != "training.threads" &&
           key.rfind("output.", 0) != 0;
}

// The shortest decimal that reads back as x.
std::string shortest(double x) {
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general);
    return std::string(buf, res.ptr);
}

void flatten(const toml::table& t, const std::string& prefix, std::map<std::string, std::string>& out) {
    for (auto&& [k, v] : t) {
        const std::string key = prefix + std::string(k.str());
        if (const toml::table* sub = v.as_table()) {
            flatten(*sub, key + ".", out);
        } else if (experiment_key(key)) {
            std::ostringstream text;
            if (const toml::array* a = v.as_array()) text << *a;
            else if (const auto* str = v.as_string()) text << str->get();  // e5m2, not 'e5m2'
            else if (const auto* d = v.as_floating_point())
                text << shortest(d->get());  // 0.003, not 0.0030000000000000001
            else v.visit([&](auto&& x) { text << x; });
            out[key] = text.str();
        }
    }
}

// config.toml through the config loader; when that refuses it (a run written by
// another version of the host), the few keys the report needs, read directly.
void read_config(const fs::path& file, run_record& r) {
    try {
        const config::run_config c = config::load_config(file);
        r.name = c.name;
        r.seed = c.training.seed;
        r.max_steps = c.training.max_steps;
        describe_formats(c, r);
        flatten(toml::parse(config::to_toml(c)), "", r.settings);
        return;
    } catch (const std::exception& e) {
        r.problems.push_back(std::string("config.toml: ") + e.what());
    }
    try {
        const toml::table t = toml::parse_file(file.string());
        if (auto v = t["name"].value<std::string>()) r.name = *v;
        if (auto v = t["training"]["seed"].value<int64_t>()) r.seed = *v;
        if (auto v = t["training"]["max_steps"].value<int64_t>()) r.max_steps = *v;
        const auto w = t["quantization"]["weight_format"].value<std::string>();
        const auto a = t["quantization"]["activation_format"].value<std::string>();
        const auto g = t["quantization"]["gradient_format"].value<std::string>();
        if (w && a && g) r.formats = (*w == *a && *a == *g) ? *w : "w " + *w + ", a " + *a + ", g " + *g;
    } catch (const std::exception&) {
        // Already reported above.
    }
}

// ---- summary.json -----------------------------------------------------------------

void read_summary(const fs::path& file, run_record& r) {
    run::summary_record s;
    try {
        s = run::read_summary(file);
    } catch (const run::summary_error& e) {
        const std::string what = e.what();
        const std::string reason =
            what.rfind(file.string() + ": ", 0) == 0 ? what.substr(file.string().size() + 2) : what;
        r.problems.push_back("summary.json: " + reason + ": the run counts as interrupted");
        return;
    }
    r.has_summary = true;
    r.status = s.status;
    if (r.name.empty()) r.name = s.name;
    r.run_id = s.run_id;  // metrics.jsonl's, where it has one, says the same; published runs keep none
    r.failure_mode = s.failure_mode;
    r.failure_step = s.failure_step;
    r.failure_evidence = s.failure_evidence;
    r.steps_done = s.steps_done;
    r.max_steps = s.max_steps;
    r.seed = s.seed;
    for (const auto& [name, value] : s.values.entries()) {
        const run::metric* m = run::host_catalog().stored(run::metric_record::summary, name);
        if (!(m && m->timing && !std::isfinite(value))) r.run_metrics.set(name, value);
    }
    r.corpus = s.corpus;
    if (r.formats.empty()) {
        const run::formats_record& f = s.formats;
        r.formats = (f.weight == f.activation && f.activation == f.gradient)
                        ? f.weight
                        : "w " + f.weight + ", a " + f.activation + ", g " + f.gradient;
        if (f.weight == f.activation && f.activation == f.gradient) r.uniform_format = f.weight;
    }
    r.switches = s.switches;
    r.interventions = s.interventions;
}

// ---- metrics.jsonl ----------------------------------------------------------------

void read_metrics(const fs::path& file, run_record& r, metrics_data& m) {
    run::metrics_contents contents = run::read_metrics(file);
    for (std::string& p : contents.problems) r.problems.push_back(std::move(p));
    if (!contents.run_id.empty()) r.run_id = contents.run_id;
    std::set<int64_t> train_seen;
    for (const run::metrics_line& line : contents.lines) {
        if (const auto* t = std::get_if<run::train_line>(&line)) {
            if (!train_seen.insert(t->step).second) m.repeated.insert(t->step);
            m.train[t->step] = *t;
        } else if (const auto* v = std::get_if<run::val_line>(&line)) {
            m.val[v->step] = *v;
        } else if (const auto* x = std::get_if<run::tensor_line>(&line)) {
            m.tensors[{x->step, x->tensor}] = *x;
        } else if (const auto* d = std::get_if<run::diagnostic_line>(&line)) {
            m.diagnostics[{d->step, d->diagnostic, d->tensor}] = *d;
        } else if (const auto* e = std::get_if<run::event_line>(&line)) {
            m.events[{e->step, e->event, e->plugin, e->tensor}] = *e;
        }
    }
}

// Series for the values of each diagnostic that declared no headline (see run_record::catalog).
void describe_undeclared_diagnostics(const metrics_data& m, run_record& r) {
    std::set<std::string> declared;
    for (const run::metric& x : r.catalog.metrics())
        if (x.record == run::metric_record::diagnostic) declared.insert(x.source);
    std::set<std::pair<std::string, std::string>> seen;  // (diagnostic, value), sorted
    for (const auto& [key, line] : m.diagnostics)
        if (!declared.count(line.diagnostic))
            for (const auto& [name, value] : line.values) seen.insert({line.diagnostic, name});
    for (const auto& [diagnostic, value] : seen) {
        run::metric x;
        x.name = value;
        x.record = run::metric_record::diagnostic;
        x.source = diagnostic;
        x.series = diagnostic + "." + value;
        x.title = diagnostic + ": " + value + " (mean over tensors; the plugin declares no headline values)";
        x.label = value;
        x.summary = run::tensor_summary::mean;
        x.summary_of = value;
        if (r.catalog.series(x.series) == nullptr) r.catalog.add(x);
    }
}

// The step values of a series, from the lines of its record: a stored
// metric's where its lines have it, a derived one's by its summary.
std::map<int64_t, double> series_values(const run::metric& x, const metrics_data& m) {
    std::map<int64_t, double> out;
    const std::string& of = x.source_metric();
    if (x.record == run::metric_record::train) {
        for (const auto& [step, line] : m.train)
            if (const std::optional<double> v = line.values.find(of)) out[step] = *v;
        return out;
    }
    if (x.record == run::metric_record::val) {
        for (const auto& [step, line] : m.val)
            if (const std::optional<double> v = line.values.find(of)) out[step] = *v;
        return out;
    }
    std::map<int64_t, std::vector<run::tensor_value>> at;
    if (x.record == run::metric_record::tensor) {
        for (const auto& [key, line] : m.tensors)
            if (const std::optional<double> v = line.values.find(of))
                at[key.first].push_back({false, *v, line.values.get("count")});
    } else if (x.record == run::metric_record::diagnostic) {
        for (const auto& [key, line] : m.diagnostics) {
            if (line.diagnostic != x.source) continue;
            for (const auto& [name, value] : line.values)
                if (name == of) at[line.step].push_back({line.tensor == "*", value, 0});
        }
    }
    for (const auto& [step, values] : at) out[step] = run::summarise(x, values);
    return out;
}

// The series and peaks of the record, from the deduplicated metrics.
void digest_metrics(const metrics_data& m, run_record& r) {
    r.repeated_steps = static_cast<int64_t>(m.repeated.size());
    describe_undeclared_diagnostics(m, r);
    for (const run::metric& x : r.catalog.metrics()) {
        if (x.series.empty()) continue;
        for (const auto& [step, value] : series_values(x, m))
            if (!x.derived() || !std::isnan(value)) r.series[x.series].push_back({step, value});
    }
    for (const point& p : r.train_loss())
        if (!std::isfinite(p.value)) {
            r.first_nonfinite_step = p.step;
            break;
        }
    // Per tensor lines: the per-layer series, and the peaks by role.
    for (const auto& [key, line] : m.tensors) {
        const int64_t step = key.first;
        const std::string& tensor = key.second;
        tensor_series& series = r.tensors[tensor];
        series.role = line.role;
        series.lines.push_back(line);
        if (!(line.values.get("count") > 0)) continue;
        r.max_overflow[line.role].offer(line.overflow_rate(), tensor, step);
        if (const double stall = line.bit_stall_rate(); !std::isnan(stall))
            r.max_bit_stall.offer(stall, tensor, step);
    }

    // Events: switches and intervention counts, where there is no summary.json to give them.
    if (r.has_summary) return;
    for (const auto& [key, line] : m.events) run::tally_event(line, r.switches, r.interventions);
}

}  // namespace

const std::vector<point>& run_record::series_points(const std::string& name) const {
    static const std::vector<point> none;
    const auto it = series.find(name);
    return it == series.end() ? none : it->second;
}

std::vector<run::metric> series_of_runs(const std::vector<run_record>& runs) {
    std::vector<run::metric> host, added;
    std::set<std::string> seen;
    for (const run::metric& m : run::host_metrics())
        if (!m.series.empty() && seen.insert(m.series).second) host.push_back(m);
    for (const run_record& r : runs)
        for (const run::metric& m : r.catalog.metrics())
            if (!m.series.empty() && seen.insert(m.series).second) added.push_back(m);
    std::stable_sort(added.begin(), added.end(),
                     [](const auto& a, const auto& b) { return a.series < b.series; });
    host.insert(host.end(), added.begin(), added.end());
    return host;
}

bool is_run_dir(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return false;
    for (const char* f : {"config.toml", "metrics.jsonl", "summary.json"})
        if (fs::exists(dir / f, ec)) return true;
    return false;
}

run_record read_run(const fs::path& dir) {
    run_record r;
    r.dir = dir;
    std::error_code ec;
    // A folder in a file's place is not damage a kill leaves (that is a note in
    // the report): the directory is not a run's, and a report of it would show
    // a run with no curves.
    for (const char* f : {"config.toml", "metrics.jsonl", "summary.json"})
        if (fs::is_directory(dir / f, ec)) throw error((dir / f).string() + ": is a folder, expected a file");
    r.catalog = run::catalog_of(dir, r.problems);
    if (fs::exists(dir / "config.toml", ec)) read_config(dir / "config.toml", r);
    else r.problems.push_back("no config.toml");
    if (fs::exists(dir / "summary.json", ec)) read_summary(dir / "summary.json", r);
    metrics_data m;
    if (fs::exists(dir / "metrics.jsonl", ec)) read_metrics(dir / "metrics.jsonl", r, m);
    else r.problems.push_back("no metrics.jsonl");
    digest_metrics(m, r);
    if (const auto latest = run::latest_checkpoint(dir)) r.last_checkpoint = latest->step;
    if (fs::exists(dir / "reports" / "failure.md", ec)) r.failure_report = dir / "reports" / "failure.md";

    if (r.name.empty()) {
        const fs::path clean = dir.filename().empty() ? dir.parent_path() : dir;
        r.name = clean.filename().string();
    }
    // What summary.json did not say, from the metrics.
    if (!r.steps_done && !r.train_loss().empty()) r.steps_done = r.train_loss().back().step;
    if (!r.steps_done && r.has_summary) r.steps_done = 0;
    // The losses summary.json did not give, from the metrics.
    if (!r.run_metric("final_train_loss") && !r.train_loss().empty())
        r.run_metrics.set("final_train_loss", r.train_loss().back().value);
    if (!r.run_metric("final_val_loss") && !r.val_loss().empty())
        r.run_metrics.set("final_val_loss", r.val_loss().back().value);
    if (!r.run_metric("best_val_loss")) {
        std::optional<double> best;
        for (const point& p : r.val_loss())
            if (std::isfinite(p.value) && (!best || p.value < *best)) best = p.value;
        if (best) r.run_metrics.set("best_val_loss", *best);
    }
    if (!r.has_summary) {
        std::string note = "no summary.json: interrupted or still running; steps from metrics.jsonl";
        note += r.last_checkpoint ? ", last checkpoint at step " + std::to_string(*r.last_checkpoint)
                                  : ", no checkpoint";
        r.problems.push_back(note);
    }
    if (r.status == "collapsed" && r.failure_report.empty())
        r.problems.push_back("no reports/failure.md (the collapse report)");
    if (r.repeated_steps > 0)
        r.problems.push_back("metrics.jsonl: " + std::to_string(r.repeated_steps) +
                             (r.repeated_steps == 1 ? " step" : " steps") +
                             " written twice (a resume); the later lines kept");
    return r;
}

}  // namespace altgrad::host::report
