#include "report/run_record.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <toml++/toml.h>

#include "config/run_config.hpp"
#include "util/json_value.hpp"

namespace altgrad::host::report {

void peak::offer(double r, const std::string& t, int64_t s) {
    if (!std::isfinite(r) || r <= rate) return;
    rate = r;
    tensor = t;
    step = s;
}

namespace {

// The metrics lines a file may repeat (a resume), keyed so the last one wins.
struct metrics_data {
    std::map<int64_t, double> loss;
    std::map<int64_t, json::value> step_lines;  // the whole per-step line
    std::map<int64_t, double> val;
    std::map<std::pair<int64_t, std::string>, json::value> tensors;
    std::map<std::tuple<int64_t, std::string, std::string>, json::value> diagnostics;
    std::map<std::tuple<int64_t, std::string, std::string, std::string>, json::value> events;
    std::set<int64_t> repeated;
};

std::optional<std::string> read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

double number_or_nan(const json::value* v) {
    return v != nullptr && v->is_number() ? v->as_number() : NAN;
}

std::optional<int64_t> integer_of(const json::value* v) {
    if (v == nullptr || !v->is_number()) return std::nullopt;
    const double d = v->as_number();
    if (!(d == std::floor(d)) || std::fabs(d) > 9e15) return std::nullopt;
    return static_cast<int64_t>(d);
}

// ---- config.toml ----------------------------------------------------------------

// The formats as people read them: the global formats ("e5m2", or per
// direction), then each rule's pattern and what it sets.
void describe_formats(const config::run_config& c, run_record& r) {
    const config::quantization_config& q = c.quantization;
    if (!q.enabled) {
        r.formats = "fp32 (quantization off)";
        r.uniform_format = "fp32";
        return;
    }
    const bool same = q.weight_format == q.activation_format && q.activation_format == q.gradient_format;
    std::string text = same ? q.weight_format
                            : "w " + q.weight_format + ", a " + q.activation_format + ", g " + q.gradient_format;
    for (const config::quantization_rule& rule : q.rules) {
        std::string sets;
        auto add = [&](const char* dir, const std::optional<std::string>& f) {
            if (f) sets += std::string(sets.empty() ? "" : ", ") + dir + " " + *f;
        };
        add("w", rule.weight);
        add("a", rule.activation);
        add("g", rule.gradient);
        text += "; " + rule.pattern + ": " + sets;
    }
    r.formats = text;
    // Uniform when every direction of every layer resolves to one format.
    std::set<std::string> used;
    for (const std::string& layer : config::layer_names(c.model)) {
        const config::layer_formats f = config::formats_for(q, layer);
        used.insert(f.weight);
        used.insert(f.activation);
        used.insert(f.gradient);
    }
    r.uniform_format = used.size() == 1 ? *used.begin() : "";
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
    const std::optional<std::string> text = read_text(file);
    if (!text) {
        r.problems.push_back("summary.json: cannot read");
        return;
    }
    json::value s;
    try {
        s = json::parse(*text);
    } catch (const json::parse_error& e) {
        r.problems.push_back(std::string("summary.json: ") + (e.truncated ? "half-written" : "not valid JSON") + " (" +
                             e.what() + "): the run counts as interrupted");
        return;
    }
    if (!s.is_object()) {
        r.problems.push_back("summary.json: not a JSON object: the run counts as interrupted");
        return;
    }
    r.has_summary = true;
    if (auto v = s.string_at("status")) r.status = *v;
    else {
        r.status = "error";
        r.problems.push_back("summary.json: key 'status' missing");
    }
    if (r.name.empty())
        if (auto v = s.string_at("name")) r.name = *v;
    r.failure_mode = s.string_at("failure_mode").value_or("");
    r.failure_step = integer_of(s.find("failure_step"));
    r.failure_evidence = s.string_at("failure_evidence").value_or("");
    if (auto v = integer_of(s.find("steps_done"))) r.steps_done = v;
    if (auto v = integer_of(s.find("max_steps"))) r.max_steps = v;
    if (auto v = integer_of(s.find("seed"))) r.seed = v;
    // Present but null means "not finite"; absent means "take it from the metrics".
    auto loss = [&](const char* key, std::optional<double>& out) {
        if (const json::value* v = s.find(key)) out = number_or_nan(v);
    };
    loss("final_train_loss", r.final_train_loss);
    loss("final_val_loss", r.final_val_loss);
    loss("best_val_loss", r.best_val_loss);
    if (r.formats.empty())
        if (const json::value* f = s.find("formats"); f != nullptr && f->is_object()) {
            const std::string w = f->string_at("weight").value_or("?"), a = f->string_at("activation").value_or("?"),
                              g = f->string_at("gradient").value_or("?");
            r.formats = (w == a && a == g) ? w : "w " + w + ", a " + a + ", g " + g;
            if (w == a && a == g && w != "?") r.uniform_format = w;
        }
    if (const json::value* sw = s.find("switches"); sw != nullptr && sw->is_array()) {
        for (const json::value& x : sw->items()) {
            if (!x.is_object()) continue;
            format_switch f;
            f.step = integer_of(x.find("step")).value_or(-1);
            f.tensor = x.string_at("tensor").value_or("?");
            f.from = x.string_at("from").value_or("?");
            f.to = x.string_at("to").value_or("?");
            f.plugin = x.string_at("plugin").value_or("");
            r.switches.push_back(f);
        }
    }
    if (const json::value* iv = s.find("interventions"); iv != nullptr && iv->is_object()) {
        for (const auto& [plugin, events] : iv->members()) {
            if (!events.is_object()) continue;
            for (const auto& [event, count] : events.members())
                if (auto n = integer_of(&count)) r.interventions[plugin][event] = *n;
        }
    }
}

// ---- metrics.jsonl ----------------------------------------------------------------

void read_metrics(const fs::path& file, run_record& r, metrics_data& m) {
    const std::optional<std::string> text = read_text(file);
    if (!text) {
        r.problems.push_back("metrics.jsonl: cannot read");
        return;
    }
    std::vector<std::string> bad;  // the first few, then a count
    size_t bad_count = 0;
    auto complain = [&](const std::string& what) {
        if (++bad_count <= 5) bad.push_back(what);
    };
    std::set<int64_t> loss_seen;
    size_t line_no = 0;
    for (size_t pos = 0; pos < text->size();) {
        size_t end = text->find('\n', pos);
        if (end == std::string::npos) end = text->size();
        const std::string_view line(text->data() + pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        json::value v;
        try {
            v = json::parse(line);
        } catch (const json::parse_error& e) {
            // Cut off by a kill mid-write: at the end of the file, or (after a
            // resume appended to it) in the middle.
            if (e.truncated) complain("metrics.jsonl: line " + std::to_string(line_no) + " truncated (skipped)");
            else complain("metrics.jsonl: line " + std::to_string(line_no) + ": not JSON, " + e.what() + " (skipped)");
            continue;
        }
        const std::optional<int64_t> step = v.is_object() ? integer_of(v.find("step")) : std::nullopt;
        if (!step || v.members().size() < 2) {
            complain("metrics.jsonl: line " + std::to_string(line_no) + ": no \"step\" (skipped)");
            continue;
        }
        // Lines are told apart by their second key (docs/training.md).
        const std::string& kind = v.members()[1].first;
        if (kind == "loss") {
            if (!loss_seen.insert(*step).second) m.repeated.insert(*step);
            m.loss[*step] = number_or_nan(v.find("loss"));
            m.step_lines[*step] = v;
        } else if (kind == "val_loss") {
            m.val[*step] = number_or_nan(v.find("val_loss"));
        } else if (kind == "tensor") {
            m.tensors[{*step, v.string_at("tensor").value_or("?")}] = v;
        } else if (kind == "diagnostic") {
            m.diagnostics[{*step, v.string_at("diagnostic").value_or("?"), v.string_at("tensor").value_or("?")}] = v;
        } else if (kind == "event") {
            m.events[{*step, v.string_at("event").value_or("?"), v.string_at("plugin").value_or("?"),
                      v.string_at("tensor").value_or("")}] = v;
        }
        // Other kinds: from a newer host; not an error.
    }
    if (!text->empty() && text->back() != '\n' && bad_count == 0)
        complain("metrics.jsonl: the last line has no newline (the run may still be writing)");
    for (std::string& b : bad) r.problems.push_back(std::move(b));
    if (bad_count > bad.size())
        r.problems.push_back("metrics.jsonl: " + std::to_string(bad_count - bad.size()) + " more bad lines (skipped)");
}

// The series and peaks of the record, from the deduplicated metrics.
void digest_metrics(const metrics_data& m, run_record& r) {
    for (const auto& [step, loss] : m.loss) {
        r.train_loss.push_back({step, loss});
        if (!std::isfinite(loss) && !r.first_nonfinite_step) r.first_nonfinite_step = step;
    }
    for (const auto& [step, val] : m.val) r.val_loss.push_back({step, val});
    r.repeated_steps = static_cast<int64_t>(m.repeated.size());

    std::map<int64_t, double> overflow, underflow;  // from the per-step lines
    for (const auto& [step, line] : m.step_lines) {
        if (auto x = line.number_at("overflow_rate")) overflow[step] = *x;
        if (auto x = line.number_at("underflow_rate")) underflow[step] = *x;
        if (auto x = line.number_at("grad_sparsity")) r.diagnostics["grad_sparsity"].push_back({step, *x});
    }
    // Per tensor lines: peaks by role, and the per-step series where the step lines lack them.
    std::map<int64_t, double> t_overflow, t_underflow;
    std::map<int64_t, std::pair<double, double>> stall;  // step -> (stalled elements, weight elements)
    for (const auto& [key, line] : m.tensors) {
        const int64_t step = key.first;
        const std::string& tensor = key.second;
        const double count = line.number_at("count").value_or(0);
        if (!(count > 0)) continue;
        const std::string role = line.string_at("role").value_or("?");
        if (auto o = line.number_at("overflow")) {
            r.max_overflow[role].offer(*o / count, tensor, step);
            t_overflow[step] = std::max(t_overflow.count(step) ? t_overflow[step] : 0.0, *o / count);
        }
        if (auto u = line.number_at("underflow"))
            t_underflow[step] = std::max(t_underflow.count(step) ? t_underflow[step] : 0.0, *u / count);
        if (auto b = line.number_at("bit_stall_rate")) {
            r.max_bit_stall.offer(*b, tensor, step);
            stall[step].first += *b * count;
            stall[step].second += count;
        }
    }
    for (const auto& [step, x] : (overflow.empty() ? t_overflow : overflow)) r.diagnostics["overflow"].push_back({step, x});
    for (const auto& [step, x] : (underflow.empty() ? t_underflow : underflow))
        r.diagnostics["underflow"].push_back({step, x});
    for (const auto& [step, su] : stall) r.diagnostics["bit_stall"].push_back({step, su.first / su.second});

    // Stiffness: the all-tensor value where the plugin gave one, else the mean over tensors.
    std::map<int64_t, std::pair<double, int>> stiff_mean;
    std::map<int64_t, double> stiff_all;
    for (const auto& [key, line] : m.diagnostics) {
        if (std::get<1>(key) != "stiffness") continue;
        const json::value* values = line.find("values");
        if (values == nullptr || !values->is_object()) continue;
        const std::optional<double> x = values->number_at("stiffness_mean");
        if (!x || !std::isfinite(*x)) continue;
        if (std::get<2>(key) == "*") stiff_all[std::get<0>(key)] = *x;
        else {
            stiff_mean[std::get<0>(key)].first += *x;
            stiff_mean[std::get<0>(key)].second += 1;
        }
    }
    for (const auto& [step, sn] : stiff_mean)
        if (!stiff_all.count(step)) stiff_all[step] = sn.first / sn.second;
    for (const auto& [step, x] : stiff_all) r.diagnostics["stiffness"].push_back({step, x});

    // Events: switches and intervention counts, where there is no summary.json to give them.
    if (r.has_summary) return;
    for (const auto& [key, line] : m.events) {
        const std::string& event = std::get<1>(key);
        const std::string& plugin = std::get<2>(key);
        if (event == "switch_format")
            r.switches.push_back({std::get<0>(key), line.string_at("tensor").value_or("?"),
                                  line.string_at("from").value_or("?"), line.string_at("to").value_or("?"), plugin});
        if (plugin != "host") ++r.interventions[plugin][event];
    }
}

std::optional<int64_t> newest_checkpoint(const fs::path& dir) {
    std::optional<int64_t> best;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "checkpoints", ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("step_", 0) != 0 || !fs::exists(e.path() / "state.toml", ec)) continue;
        char* end = nullptr;
        const long long step = std::strtoll(n.c_str() + 5, &end, 10);
        if (end == nullptr || *end != '\0') continue;
        if (!best || step > *best) best = step;
    }
    return best;
}

}  // namespace

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
    if (fs::exists(dir / "config.toml", ec)) read_config(dir / "config.toml", r);
    else r.problems.push_back("no config.toml");
    if (fs::exists(dir / "summary.json", ec)) read_summary(dir / "summary.json", r);
    metrics_data m;
    if (fs::exists(dir / "metrics.jsonl", ec)) read_metrics(dir / "metrics.jsonl", r, m);
    else r.problems.push_back("no metrics.jsonl");
    digest_metrics(m, r);
    r.last_checkpoint = newest_checkpoint(dir);
    if (fs::exists(dir / "reports" / "failure.md", ec)) r.failure_report = dir / "reports" / "failure.md";

    if (r.name.empty()) {
        const fs::path clean = dir.filename().empty() ? dir.parent_path() : dir;
        r.name = clean.filename().string();
    }
    // What summary.json did not say, from the metrics.
    if (!r.steps_done && !r.train_loss.empty()) r.steps_done = r.train_loss.back().step;
    if (!r.steps_done && r.has_summary) r.steps_done = 0;
    if (!r.final_train_loss && !r.train_loss.empty()) r.final_train_loss = r.train_loss.back().value;
    if (!r.final_val_loss && !r.val_loss.empty()) r.final_val_loss = r.val_loss.back().value;
    if (!r.best_val_loss) {
        for (const point& p : r.val_loss)
            if (std::isfinite(p.value) && (!r.best_val_loss || p.value < *r.best_val_loss)) r.best_val_loss = p.value;
    }
    if (!r.has_summary) {
        std::string note = "no summary.json: interrupted or still running; steps from metrics.jsonl";
        note += r.last_checkpoint ? ", last checkpoint at step " + std::to_string(*r.last_checkpoint)
                                  : ", no checkpoint";
        r.problems.push_back(note);
    }
    if (r.status == "collapsed" && r.failure_report.empty()) r.problems.push_back("no reports/failure.md (the collapse report)");
    if (r.repeated_steps > 0)
        r.problems.push_back("metrics.jsonl: " + std::to_string(r.repeated_steps) +
                             (r.repeated_steps == 1 ? " step" : " steps") + " written twice (a resume); the later lines kept");
    return r;
}

}  // namespace altgrad::host::report
