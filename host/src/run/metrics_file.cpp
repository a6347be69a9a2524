// metrics.jsonl: its lines written in the catalog's order, read back whatever they hold.
#include <cmath>
#include <sstream>

#include "run/files.hpp"
#include "run/json_io.hpp"
#include "util/file_text.hpp"

namespace altgrad::host::run {

using namespace json_io;

namespace {

// Whether `key` is a metric of `record` the host knows.
bool record_knows(metric_record record, const std::string& key) {
    for (const metric* m : host_catalog().of_record(record))
        if (m->name == key) return true;
    return false;
}

// A train or val line's values: every number it holds (a newer host's
// metrics too, which its catalog.json describes), the host's required ones
// present and every one it knows a number or null.
metric_values step_values(const fields& f, const json& j, metric_record record) {
    metric_values values;
    for (const metric* m : host_catalog().of_record(record))
        if (m->required) f.at(m->name.c_str());  // "missing", naming the key
    for (const auto& [key, value] : j.items()) {
        if (key == "kind" || key == "run_id" || key == "step") continue;
        if (value.is_number() || value.is_null()) values.set(key, f.number(key.c_str()));
        else if (record_knows(record, key)) f.number(key.c_str());  // "expected a number or null"
    }
    return values;
}

// The catalog's metrics of `record` that `values` holds, in the catalog's order.
void put_values(json& j, const metric_catalog& catalog, metric_record record, const metric_values& values) {
    for (const metric* m : catalog.of_record(record))
        if (const std::optional<double> v = values.find(m->name)) put_metric(j, *m, *v);
}

json line_json(const metrics_line& line, const std::string& run_id, const metric_catalog& catalog) {
    json j = {{"kind", kind_name(line)}, {"run_id", run_id}, {"step", step_of(line)}};
    std::visit(
        [&](const auto& l) {
            using T = std::decay_t<decltype(l)>;
            if constexpr (std::is_same_v<T, train_line>) {
                put_values(j, catalog, metric_record::train, l.values);
            } else if constexpr (std::is_same_v<T, val_line>) {
                put_values(j, catalog, metric_record::val, l.values);
            } else if constexpr (std::is_same_v<T, tensor_line>) {
                j["tensor"] = l.tensor;
                j["role"] = l.role;
                j["format"] = l.format;
                put_values(j, catalog, metric_record::tensor, l.values);
            } else if constexpr (std::is_same_v<T, diagnostic_line>) {
                j["diagnostic"] = l.diagnostic;
                j["tensor"] = l.tensor;
                j["role"] = l.role;
                json values = json::object();
                for (const auto& [name, value] : l.values) values[name] = number_or_null(value);
                j["values"] = values;
            } else {
                j["event"] = l.event;
                j["plugin"] = l.plugin;
                j["reason"] = l.reason;
                if (l.value) j["value"] = number_or_null(*l.value);
                if (!l.tensor.empty()) {
                    j["tensor"] = l.tensor;
                    j["from"] = l.from;
                    j["to"] = l.to;
                }
                if (!l.mode.empty()) j["mode"] = l.mode;
                if (l.evidence_step) j["evidence_step"] = *l.evidence_step;
            }
        },
        line);
    return j;
}

// The kind of a line: its "kind", or for lines of hosts before "kind" existed,
// the key that told them apart.
std::string kind_of(const json& j) {
    if (j.contains("kind") && j["kind"].is_string()) return j["kind"].get<std::string>();
    // Events and diagnostics name a tensor too: they come before "tensor".
    if (j.contains("loss")) return "train";
    if (j.contains("val_loss")) return "val";
    for (const char* k : {"event", "diagnostic", "tensor"})
        if (j.contains(k)) return k;
    return "";
}

std::optional<metrics_line> line_from(const json& j, const std::string& where) {
    const fields f(j, where);
    const std::string kind = kind_of(j);
    const int64_t step = f.integer("step");
    if (kind == "train") return train_line{step, step_values(f, j, metric_record::train)};
    if (kind == "val") return val_line{step, step_values(f, j, metric_record::val)};
    if (kind == "tensor") {
        tensor_line t;
        t.step = step;
        t.tensor = f.string("tensor");
        t.role = f.string("role");
        t.format = f.string("format");
        for (const metric* m : host_catalog().of_record(metric_record::tensor)) {
            if (const std::optional<double> v = get_metric(f, *m)) t.values.set(m->name, *v);
            else if (m->required) f.at(m->name.c_str());  // "missing", naming the key
        }
        return t;
    }
    if (kind == "diagnostic") {
        diagnostic_line d;
        d.step = step;
        d.diagnostic = f.string("diagnostic");
        d.tensor = f.string("tensor");
        d.role = f.string("role");
        const fields values = f.object("values");
        for (const auto& [name, value] : f.at("values").items())
            d.values.emplace_back(name, values.number(name.c_str()));
        return d;
    }
    if (kind == "event") {
        event_line e;
        e.step = step;
        e.event = f.string("event");
        e.plugin = f.string("plugin");
        e.reason = f.string("reason");
        if (f.has("value")) e.value = f.number("value");
        if (f.has("tensor")) {
            e.tensor = f.string("tensor");
            e.from = f.string("from");
            e.to = f.string("to");
        }
        if (f.has("mode")) e.mode = f.string("mode");
        e.evidence_step = f.optional_integer("evidence_step");
        return e;
    }
    return std::nullopt;  // a kind of a newer host
}

}  // namespace

// ---- records ----------------------------------------------------------------------------

const char* kind_name(const metrics_line& line) {
    static const char* const names[] = {"train", "val", "tensor", "diagnostic", "event"};
    return names[line.index()];
}

double tensor_line::overflow_rate() const {
    const double n = values.get("count");
    return n > 0 ? values.get("overflow") / n : NAN;
}

double tensor_line::underflow_rate() const {
    const double n = values.get("count");
    return n > 0 ? values.get("underflow") / n : NAN;
}

int64_t step_of(const metrics_line& line) {
    return std::visit([](const auto& l) { return l.step; }, line);
}

// ---- metrics.jsonl --------------------------------------------------------------------

std::string metrics_line_text(const metrics_line& line, const std::string& run_id,
                              const metric_catalog& catalog) {
    return line_json(line, run_id, catalog).dump();
}

metrics_writer::metrics_writer(fs::path file, std::string run_id, bool append, metric_catalog catalog)
    : file_(std::move(file)),
      run_id_(std::move(run_id)),
      catalog_(std::move(catalog)),
      out_(file_, append ? std::ios::app : std::ios::trunc) {
    if (!out_) throw error(file_.string() + ": cannot write");
}

void metrics_writer::write(const metrics_line& line) {
    out_ << metrics_line_text(line, run_id_, catalog_) << '\n';
    out_.flush();
    if (!out_) throw error(file_.string() + ": cannot write (disk full?)");
}

metrics_contents read_metrics(const fs::path& file) {
    const std::optional<std::string> text = read_text(file, kMetricsLimit);
    if (!text) {
        metrics_contents m;
        m.problems.push_back("metrics.jsonl: cannot read");
        return m;
    }
    return parse_metrics(*text);
}

metrics_contents parse_metrics(const std::string& text) {
    metrics_contents m;
    std::vector<std::string> bad;  // the first few, then a count
    size_t bad_count = 0;
    auto complain = [&](const std::string& what) {
        if (++bad_count <= 5) bad.push_back(what);
    };
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        const std::string_view line(text.data() + pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        const std::string where = "metrics.jsonl: line " + std::to_string(line_no);
        json j;
        try {
            j = parse_json(line);
        } catch (const json_failure& e) {
            // Cut off by a kill mid-write: at the end of the file, or (after a
            // resume appended to it) in the middle.
            if (e.cut_short) complain(where + " truncated (skipped)");
            else complain(where + ": not JSON, " + e.message + " (skipped)");
            continue;
        }
        try {
            if (std::optional<metrics_line> l = line_from(j, where)) {
                if (j.contains("run_id") && j["run_id"].is_string())
                    m.run_id = j["run_id"].get<std::string>();
                m.lines.push_back(std::move(*l));
            }
        } catch (const error& e) {
            complain(std::string(e.what()) + " (skipped)");
        }
    }
    if (!text.empty() && text.back() != '\n' && bad_count == 0)
        complain("metrics.jsonl: the last line has no newline (the run may still be writing)");
    for (std::string& b : bad) m.problems.push_back(std::move(b));
    if (bad_count > bad.size())
        m.problems.push_back("metrics.jsonl: " + std::to_string(bad_count - bad.size()) +
                             " more bad lines (skipped)");
    return m;
}

void truncate_metrics(const fs::path& file, int64_t last_step) {
    const std::optional<std::string> text = read_text(file, kMetricsLimit);
    if (!text) throw error(file.string() + ": cannot read");
    std::istringstream in(*text);
    std::string kept, line;
    while (std::getline(in, line)) {
        const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
        if (j["step"].get<int64_t>() <= last_step) kept += line + "\n";
    }
    write_file_atomically(file, kept);
}

void tally_event(const event_line& e, std::vector<format_switch>& switches,
                 std::map<std::string, std::map<std::string, int64_t>>& interventions) {
    if (e.event == "switch_format") switches.push_back({e.step, e.plugin, e.tensor, e.from, e.to});
    if (e.plugin != "host") ++interventions[e.plugin][e.event];
}

}  // namespace altgrad::host::run
