#include "run/files.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <sstream>

#include <boost/crc.hpp>
#include <nlohmann/json.hpp>

namespace altgrad::host::run {

namespace {

// Ordered: keys stay in the order written, so "kind", "run_id", "step" lead.
using json = nlohmann::ordered_json;

// ---- numbers ------------------------------------------------------------------------

// Metrics and summary numbers: JSON has no NaN or Inf, and null reads as NaN in pandas.
json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// State numbers, exactly: finite doubles round-trip through nlohmann's
// shortest decimal form; the non-finite ones become strings.
json exact(double x) {
    if (std::isfinite(x)) return json(x);
    if (std::isnan(x)) return json("nan");
    return json(x > 0 ? "inf" : "-inf");
}

// ---- reading fields, with errors naming the file and key ---------------------------------

class fields {
public:
    fields(const json& object, std::string where, std::string prefix = "")
        : j_(object), where_(std::move(where)), prefix_(std::move(prefix)) {
        if (!j_.is_object()) throw fail("", "expected an object");
    }
    error fail(const std::string& key, const std::string& what) const {
        if (key.empty() && prefix_.empty()) return error(where_ + ": " + what);
        return error(where_ + ": key '" + prefix_ + key + "': " + what);
    }
    bool has(const char* key) const { return j_.contains(key); }
    const json& at(const char* key) const {
        const auto it = j_.find(key);
        if (it == j_.end()) throw fail(key, "missing");
        return *it;
    }
    fields object(const char* key) const { return fields(at(key), where_, prefix_ + key + "."); }
    const json& array(const char* key) const {
        const json& a = at(key);
        if (!a.is_array()) throw fail(key, "expected an array");
        return a;
    }
    std::string string(const char* key) const {
        const json& v = at(key);
        if (!v.is_string()) throw fail(key, "expected a string");
        return v.get<std::string>();
    }
    int64_t integer(const char* key) const {
        const json& v = at(key);
        if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
            throw fail(key, "out of range");
        if (!v.is_number_integer()) throw fail(key, "expected an integer");
        return v.get<int64_t>();
    }
    uint64_t count(const char* key) const {
        const json& v = at(key);
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
            throw fail(key, "expected a count (an integer >= 0)");
        return v.get<uint64_t>();
    }
    std::optional<int64_t> optional_integer(const char* key) const {
        if (!has(key) || at(key).is_null()) return std::nullopt;
        return integer(key);
    }
    // A metrics or summary number: null is NaN.
    double number(const char* key) const {
        const json& v = at(key);
        if (v.is_null()) return NAN;
        if (!v.is_number()) throw fail(key, "expected a number or null");
        return v.get<double>();
    }
    // A state number (exact()'s form).
    double exact_number(const char* key) const { return exact_value(at(key), key); }
    double exact_value(const json& v, const std::string& key) const {
        if (v.is_number()) return v.get<double>();
        if (v.is_string()) {
            const std::string s = v.get<std::string>();
            if (s == "nan") return NAN;
            if (s == "inf") return INFINITY;
            if (s == "-inf") return -INFINITY;
        }
        throw fail(key, "expected a number, \"nan\", \"inf\" or \"-inf\"");
    }
    std::string key(const std::string& k) const { return prefix_ + k; }
    const std::string& where() const { return where_; }

private:
    const json& j_;
    std::string where_, prefix_;
};

// Text that is not JSON: nlohmann's message without its
// "[json.exception.parse_error.101] " tag, and whether the text ended inside a
// value (a writer killed mid-write: the error is at its last byte) rather than
// holding something that is not JSON.
struct json_failure {
    std::string message;
    bool cut_short;
};

std::string untagged(const nlohmann::json::exception& e) {
    const std::string what = e.what();
    const size_t at = what.find("] ");
    return at == std::string::npos ? what : what.substr(at + 2);
}

// json::parse, throwing json_failure for every text it refuses: a number
// beyond double's range ("1e400") is an out_of_range error, not a
// parse_error, and escaped the readers that caught only the latter.
json parse_json(std::string_view text) {
    try {
        return json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw json_failure{untagged(e), e.byte >= text.size()};
    } catch (const nlohmann::json::exception& e) {
        throw json_failure{untagged(e), false};
    }
}

std::optional<std::string> read_text(const fs::path& file) {
    std::error_code ec;
    if (fs::is_directory(file, ec)) return std::nullopt;
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::nullopt;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return std::nullopt;
    return text;
}

json parse_json_text(const std::string& text, const std::string& name) {
    try {
        return parse_json(text);
    } catch (const json_failure& e) {
        throw error(name + ": " + (e.cut_short ? "cut short (half-written?): " : "not valid JSON: ") + e.message);
    }
}

// ---- the history ----------------------------------------------------------------------

json switches_json(const std::vector<format_switch>& switches) {
    json a = json::array();
    for (const format_switch& s : switches)
        a.push_back({{"step", s.step}, {"tensor", s.tensor}, {"from", s.from}, {"to", s.to}, {"plugin", s.plugin}});
    return a;
}

std::vector<format_switch> switches_from(const fields& f, const char* key) {
    std::vector<format_switch> out;
    const json& a = f.array(key);
    for (size_t i = 0; i < a.size(); ++i) {
        const fields s(a[i], f.where(), f.key(key) + "[" + std::to_string(i) + "].");
        out.push_back({s.integer("step"), s.string("plugin"), s.string("tensor"), s.string("from"), s.string("to")});
    }
    return out;
}

json interventions_json(const std::map<std::string, std::map<std::string, int64_t>>& counts) {
    json o = json::object();
    for (const auto& [plugin, kinds] : counts) {
        json k = json::object();
        for (const auto& [kind, n] : kinds) k[kind] = n;
        o[plugin] = k;
    }
    return o;
}

std::map<std::string, std::map<std::string, int64_t>> interventions_from(const fields& f, const char* key) {
    std::map<std::string, std::map<std::string, int64_t>> out;
    (void)f.object(key);  // an object, or an error naming the key
    for (const auto& [plugin, kinds] : f.at(key).items()) {
        const fields k(kinds, f.where(), f.key(key) + "." + plugin + ".");
        for (const auto& [kind, n] : kinds.items()) out[plugin][kind] = k.integer(kind.c_str());
    }
    return out;
}

json history_json(const run_history& h) {
    json trend = json::array();
    for (const trend_row& r : h.trend)
        trend.push_back({{"step", r.step}, {"loss", exact(r.loss)}, {"grad_norm", exact(r.grad_norm)},
                         {"grad_sparsity", exact(r.grad_sparsity)}, {"overflow_rate", exact(r.overflow_rate)},
                         {"bit_stall_rate", exact(r.bit_stall_rate)}});
    json diagnostics = json::array();
    for (const diagnostic_mean& d : h.diagnostics)
        diagnostics.push_back({{"step", d.step}, {"name", d.name}, {"value", exact(d.value)}});
    return {{"switches", switches_json(h.switches)},
            {"interventions", interventions_json(h.interventions)},
            {"events", h.events},
            {"trend", trend},
            {"diagnostics", diagnostics},
            {"last_val_loss", exact(h.last_val_loss)},
            {"best_val_loss", exact(h.best_val_loss)},
            {"elapsed_seconds", exact(h.elapsed_seconds)},
            {"elapsed_cpu_seconds", exact(h.elapsed_cpu_seconds)}};
}

run_history history_from(const fields& f) {
    run_history h;
    h.switches = switches_from(f, "switches");
    h.interventions = interventions_from(f, "interventions");
    const json& events = f.array("events");
    for (const json& e : events) {
        if (!e.is_string()) throw f.fail("events", "expected an array of strings");
        h.events.push_back(e.get<std::string>());
    }
    const json& trend = f.array("trend");
    for (size_t i = 0; i < trend.size(); ++i) {
        const fields r(trend[i], f.where(), f.key("trend[" + std::to_string(i) + "]."));
        h.trend.push_back({r.integer("step"), r.exact_number("loss"), r.exact_number("grad_norm"),
                           r.exact_number("grad_sparsity"), r.exact_number("overflow_rate"),
                           r.exact_number("bit_stall_rate")});
    }
    const json& diagnostics = f.array("diagnostics");
    for (size_t i = 0; i < diagnostics.size(); ++i) {
        const fields d(diagnostics[i], f.where(), f.key("diagnostics[" + std::to_string(i) + "]."));
        h.diagnostics.push_back({d.integer("step"), d.string("name"), d.exact_number("value")});
    }
    h.last_val_loss = f.exact_number("last_val_loss");
    h.best_val_loss = f.exact_number("best_val_loss");
    // Checkpoints of hosts before these fields: the time before the resume is unknown.
    for (auto [key, value] : {std::pair{"elapsed_seconds", &h.elapsed_seconds},
                              std::pair{"elapsed_cpu_seconds", &h.elapsed_cpu_seconds}}) {
        *value = f.has(key) ? f.exact_number(key) : NAN;
        if (!std::isnan(*value) && !(*value >= 0 && std::isfinite(*value)))
            throw f.fail(key, "expected a time in seconds >= 0 or \"nan\"");
    }
    return h;
}

// ---- metrics lines --------------------------------------------------------------------

json line_json(const metrics_line& line, const std::string& run_id) {
    json j = {{"kind", kind_name(line)}, {"run_id", run_id}, {"step", step_of(line)}};
    std::visit(
        [&](const auto& l) {
            using T = std::decay_t<decltype(l)>;
            if constexpr (std::is_same_v<T, train_line>) {
                j["loss"] = number_or_null(l.loss);
                j["lr"] = number_or_null(l.lr);
                j["grad_norm"] = number_or_null(l.grad_norm);
                j["tokens_per_s"] = number_or_null(l.tokens_per_s);
                j["grad_sparsity"] = number_or_null(l.grad_sparsity);
                j["overflow_rate"] = number_or_null(l.overflow_rate);
                j["underflow_rate"] = number_or_null(l.underflow_rate);
            } else if constexpr (std::is_same_v<T, val_line>) {
                j["val_loss"] = number_or_null(l.val_loss);
            } else if constexpr (std::is_same_v<T, tensor_line>) {
                j["tensor"] = l.tensor;
                j["role"] = l.role;
                j["format"] = l.format;
                j["scale"] = number_or_null(l.scale);
                j["amax"] = number_or_null(l.amax);
                j["overflow"] = l.overflow;
                j["underflow"] = l.underflow;
                j["count"] = l.count;
                if (l.bit_stall_rate) j["bit_stall_rate"] = number_or_null(*l.bit_stall_rate);
                if (l.blocks)
                    j["blocks"] = {{"blocks", l.blocks->blocks},
                                   {"saturated", l.blocks->saturated},
                                   {"underflowed", l.blocks->underflowed},
                                   {"neutral", l.blocks->neutral},
                                   {"smallest_scale", number_or_null(l.blocks->smallest_scale)},
                                   {"largest_scale", number_or_null(l.blocks->largest_scale)}};
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
    if (kind == "train") {
        return train_line{step,
                          f.number("loss"),
                          f.number("lr"),
                          f.number("grad_norm"),
                          f.number("tokens_per_s"),
                          f.number("grad_sparsity"),
                          f.number("overflow_rate"),
                          f.number("underflow_rate")};
    }
    if (kind == "val") return val_line{step, f.number("val_loss")};
    if (kind == "tensor") {
        tensor_line t;
        t.step = step;
        t.tensor = f.string("tensor");
        t.role = f.string("role");
        t.format = f.string("format");
        t.scale = f.number("scale");
        t.amax = f.number("amax");
        t.overflow = f.count("overflow");
        t.underflow = f.count("underflow");
        t.count = f.count("count");
        if (f.has("bit_stall_rate")) t.bit_stall_rate = f.number("bit_stall_rate");
        if (f.has("blocks")) {
            const fields b = f.object("blocks");
            t.blocks = run::block_scales_line{b.count("blocks"),         b.count("saturated"),
                                              b.count("underflowed"),    b.count("neutral"),
                                              b.number("smallest_scale"), b.number("largest_scale")};
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
        for (const auto& [name, value] : f.at("values").items()) d.values.emplace_back(name, values.number(name.c_str()));
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

int64_t step_of(const metrics_line& line) {
    return std::visit([](const auto& l) { return l.step; }, line);
}

// ---- paths ----------------------------------------------------------------------------

fs::path config_file(const fs::path& run_dir) { return run_dir / "config.toml"; }
fs::path metrics_file(const fs::path& run_dir) { return run_dir / "metrics.jsonl"; }
fs::path summary_file(const fs::path& run_dir) { return run_dir / "summary.json"; }
fs::path reports_dir(const fs::path& run_dir) { return run_dir / "reports"; }
fs::path checkpoints_dir(const fs::path& run_dir) { return run_dir / "checkpoints"; }
fs::path state_file(const fs::path& checkpoint) { return checkpoint / "state.json"; }

fs::path checkpoint_dir(const fs::path& run_dir, int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "step_%07lld", static_cast<long long>(step));
    return checkpoints_dir(run_dir) / name;
}

std::vector<checkpoint_ref> complete_checkpoints(const fs::path& run_dir) {
    std::vector<checkpoint_ref> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(checkpoints_dir(run_dir), ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("step_", 0) != 0 || n.size() == 5) continue;
        char* end = nullptr;
        const long long step = std::strtoll(n.c_str() + 5, &end, 10);
        if (end == nullptr || *end != '\0' || step < 0) continue;
        if (fs::is_regular_file(state_file(e.path()), ec)) found.push_back({step, e.path(), false});
        else if (fs::is_regular_file(e.path() / "state.toml", ec)) found.push_back({step, e.path(), true});
    }
    std::sort(found.begin(), found.end(), [](const checkpoint_ref& a, const checkpoint_ref& b) { return a.step < b.step; });
    return found;
}

std::optional<checkpoint_ref> latest_checkpoint(const fs::path& run_dir) {
    std::vector<checkpoint_ref> all = complete_checkpoints(run_dir);
    if (all.empty()) return std::nullopt;
    return all.back();
}

void write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw error(path.string() + ": cannot write (disk full?)");
}

void write_file_atomically(const fs::path& path, const std::string& text) {
    const fs::path tmp = path.string() + ".tmp";
    try {
        write_file(tmp, text);
    } catch (const error&) {
        std::error_code ec;
        fs::remove(tmp, ec);
        throw error(path.string() + ": cannot write (disk full?)");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw error(path.string() + ": cannot write (" + ec.message() + ")");
}

// ---- metrics.jsonl --------------------------------------------------------------------

std::string metrics_line_text(const metrics_line& line, const std::string& run_id) {
    return line_json(line, run_id).dump();
}

metrics_writer::metrics_writer(fs::path file, std::string run_id, bool append)
    : file_(std::move(file)), run_id_(std::move(run_id)), out_(file_, append ? std::ios::app : std::ios::trunc) {
    if (!out_) throw error(file_.string() + ": cannot write");
}

void metrics_writer::write(const metrics_line& line) {
    out_ << metrics_line_text(line, run_id_) << '\n';
    out_.flush();
    if (!out_) throw error(file_.string() + ": cannot write (disk full?)");
}

metrics_contents read_metrics(const fs::path& file) {
    const std::optional<std::string> text = read_text(file);
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
                if (j.contains("run_id") && j["run_id"].is_string()) m.run_id = j["run_id"].get<std::string>();
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
        m.problems.push_back("metrics.jsonl: " + std::to_string(bad_count - bad.size()) + " more bad lines (skipped)");
    return m;
}

void truncate_metrics(const fs::path& file, int64_t last_step) {
    const std::optional<std::string> text = read_text(file);
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

// ---- summary.json ------------------------------------------------------------------------

void write_summary(const fs::path& run_dir, const summary_record& s) {
    json j = {{"run_id", s.run_id},
              {"name", s.name},
              {"status", s.status},
              {"failure_mode", s.failure_mode},
              {"failure_step", s.failure_step ? json(*s.failure_step) : json(nullptr)},
              {"failure_evidence", s.failure_evidence},
              {"steps_done", s.steps_done},
              {"max_steps", s.max_steps},
              {"seed", s.seed},
              {"final_train_loss", number_or_null(s.final_train_loss)},
              {"final_val_loss", number_or_null(s.final_val_loss)},
              {"best_val_loss", number_or_null(s.best_val_loss)},
              {"seconds", number_or_null(s.seconds)},
              {"cpu_seconds", number_or_null(s.cpu_seconds)},
              {"formats", {{"weight", s.formats.weight}, {"activation", s.formats.activation}, {"gradient", s.formats.gradient}}},
              {"corpus",
               {{"unigram_entropy", number_or_null(s.corpus.unigram_entropy)},
                {"bigram", number_or_null(s.corpus.bigram)},
                {"trigram", number_or_null(s.corpus.trigram)}}},
              {"switches", switches_json(s.switches)},
              {"interventions", interventions_json(s.interventions)}};
    j["crash"] = nullptr;
    if (s.crash)
        j["crash"] = {{"signal", s.crash->signal},
                      {"signal_name", s.crash->signal_name},
                      {"plugin", s.crash->plugin.empty() ? json(nullptr) : json(s.crash->plugin)},
                      {"call", s.crash->call.empty() ? json(nullptr) : json(s.crash->call)},
                      {"steps_done", s.crash->steps_done}};
    write_file_atomically(summary_file(run_dir), j.dump(2) + "\n");
}

summary_record read_summary(const fs::path& file) {
    const std::optional<std::string> text = read_text(file);
    if (!text) throw summary_error(file.string() + ": cannot read", false);
    return parse_summary(*text, file.string());
}

summary_record parse_summary(const std::string& text, const std::string& name) {
    json j;
    try {
        j = parse_json(text);
    } catch (const json_failure& e) {
        throw summary_error(name + ": " + (e.cut_short ? "half-written" : "not valid JSON") + " (" + e.message + ")",
                            e.cut_short);
    }
    try {
        const fields f(j, name);
        summary_record s;
        if (f.has("run_id")) s.run_id = f.string("run_id");  // hosts before run ids wrote none
        s.name = f.string("name");
        s.status = f.string("status");
        s.failure_mode = f.string("failure_mode");
        s.failure_step = f.optional_integer("failure_step");
        s.failure_evidence = f.string("failure_evidence");
        s.steps_done = f.integer("steps_done");
        s.max_steps = f.integer("max_steps");
        s.seed = f.integer("seed");
        s.final_train_loss = f.number("final_train_loss");
        s.final_val_loss = f.number("final_val_loss");
        s.best_val_loss = f.number("best_val_loss");
        s.seconds = f.number("seconds");
        if (f.has("cpu_seconds")) s.cpu_seconds = f.number("cpu_seconds");  // hosts before it wrote none
        const fields formats = f.object("formats");
        s.formats = {formats.string("weight"), formats.string("activation"), formats.string("gradient")};
        if (f.has("corpus")) {  // hosts before it wrote none
            const fields corpus = f.object("corpus");
            s.corpus = {corpus.number("unigram_entropy"), corpus.number("bigram"), corpus.number("trigram")};
        }
        s.switches = switches_from(f, "switches");
        s.interventions = interventions_from(f, "interventions");
        // Hosts before "crash" wrote none; null: not a crash.
        if (f.has("crash") && !f.at("crash").is_null()) {
            const fields c = f.object("crash");
            crash_record r;
            r.signal = static_cast<int>(c.integer("signal"));
            r.signal_name = c.string("signal_name");
            r.plugin = c.at("plugin").is_null() ? "" : c.string("plugin");
            r.call = c.at("call").is_null() ? "" : c.string("call");
            r.steps_done = c.integer("steps_done");
            s.crash = r;
        }
        return s;
    } catch (const error& e) {
        throw summary_error(e.what(), false);
    }
}

// ---- checkpoints/step_N/state.json --------------------------------------------------------

namespace {

std::optional<file_record> fingerprint(const fs::path& file, const std::string& relative) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::nullopt;
    boost::crc_32_type crc;
    file_record r;
    r.path = relative;
    char buf[1 << 16];
    while (in) {
        in.read(buf, sizeof buf);
        const std::streamsize n = in.gcount();
        crc.process_bytes(buf, static_cast<size_t>(n));
        r.bytes += static_cast<uint64_t>(n);
    }
    if (in.bad()) return std::nullopt;
    r.crc32 = crc.checksum();
    return r;
}

}  // namespace

std::vector<file_record> checkpoint_files(const fs::path& checkpoint) {
    std::vector<file_record> out;
    for (const auto& e : fs::recursive_directory_iterator(checkpoint)) {
        if (!e.is_regular_file()) continue;
        const std::string relative = fs::relative(e.path(), checkpoint).generic_string();
        if (relative == "state.json") continue;
        const std::optional<file_record> r = fingerprint(e.path(), relative);
        if (!r) throw error(e.path().string() + ": cannot read");
        out.push_back(*r);
    }
    std::sort(out.begin(), out.end(), [](const file_record& a, const file_record& b) { return a.path < b.path; });
    return out;
}

void verify_checkpoint_files(const fs::path& checkpoint, const std::vector<file_record>& files) {
    for (const file_record& want : files) {
        const fs::path file = checkpoint / want.path;
        const std::optional<file_record> got = fingerprint(file, want.path);
        if (!got) throw error(file.string() + ": missing or unreadable (the checkpoint is incomplete)");
        if (got->bytes != want.bytes)
            throw error(file.string() + ": " + std::to_string(got->bytes) + " bytes, but state.json recorded " +
                        std::to_string(want.bytes) + " (the file is damaged or was replaced)");
        if (got->crc32 != want.crc32)
            throw error(file.string() + ": its contents changed since the checkpoint was written (CRC-32 mismatch: the "
                        "file is damaged)");
    }
}

void write_checkpoint_state(const fs::path& checkpoint, const checkpoint_state& s) {
    const auto streak = [](const streak_record& r) {
        return json{{"length", r.length}, {"first_step", r.first_step}, {"first_value", exact(r.first_value)},
                    {"last_value", exact(r.last_value)}};
    };
    json files = json::array();
    for (const file_record& f : s.files) files.push_back({{"path", f.path}, {"bytes", f.bytes}, {"crc32", f.crc32}});
    json sites = json::array();
    for (const site_record& r : s.sites) {
        json history = json::array();
        for (const double a : r.scaling.amax_history) history.push_back(exact(a));
        sites.push_back({{"name", r.name},
                         {"format", r.format},
                         {"bit_stall_rate", exact(r.bit_stall_rate)},
                         {"scale", exact(r.scaling.scale)},
                         {"amax_history", history}});
    }
    const json j = {{"layout", checkpoint_state::kVersion},
                    {"run_id", s.run_id},
                    {"step", s.step},
                    {"loop", {{"window_loss_sum", exact(s.window_loss_sum)}, {"window_loss_n", s.window_loss_n}}},
                    {"failure_detector",
                     {{"nonfinite", streak(s.detector.nonfinite)},
                      {"bit_stall", streak(s.detector.bit_stall)},
                      {"overflow", streak(s.detector.overflow)},
                      {"vanishing", streak(s.detector.vanishing)},
                      {"previous_window_loss", exact(s.detector.previous_window_loss)}}},
                    {"sites", sites},
                    {"history", history_json(s.history)},
                    {"files", files}};
    write_file_atomically(state_file(checkpoint), j.dump(1) + "\n");
}

checkpoint_state read_checkpoint_state(const fs::path& checkpoint) {
    const fs::path file = state_file(checkpoint);
    const std::optional<std::string> text = read_text(file);
    if (!text) throw error(file.string() + ": cannot read");
    return parse_checkpoint_state(*text, file.string());
}

checkpoint_state parse_checkpoint_state(const std::string& text, const std::string& name) {
    const json j = parse_json_text(text, name);
    const fields f(j, name);
    const int64_t layout = f.integer("layout");
    if (layout != checkpoint_state::kVersion)
        throw f.fail("layout", std::to_string(layout) + " is not this host's " +
                                   std::to_string(checkpoint_state::kVersion) + " (written by another version of altgrad-host)");
    checkpoint_state s;
    s.run_id = f.string("run_id");
    s.step = f.integer("step");
    const fields loop = f.object("loop");
    s.window_loss_sum = loop.exact_number("window_loss_sum");
    s.window_loss_n = loop.integer("window_loss_n");
    const fields d = f.object("failure_detector");
    const auto streak = [&](const char* key) {
        const fields r = d.object(key);
        return streak_record{r.integer("length"), r.integer("first_step"), r.exact_number("first_value"),
                             r.exact_number("last_value")};
    };
    s.detector = {streak("nonfinite"), streak("bit_stall"), streak("overflow"), streak("vanishing"),
                  d.exact_number("previous_window_loss")};
    const json& sites = f.array("sites");
    for (size_t i = 0; i < sites.size(); ++i) {
        const fields r(sites[i], name, "sites[" + std::to_string(i) + "].");
        site_record site;
        site.name = r.string("name");
        site.format = r.string("format");
        site.bit_stall_rate = r.exact_number("bit_stall_rate");
        site.scaling.scale = static_cast<float>(r.exact_number("scale"));
        const json& history = r.array("amax_history");
        for (size_t k = 0; k < history.size(); ++k)
            site.scaling.amax_history.push_back(r.exact_value(history[k], "amax_history[" + std::to_string(k) + "]"));
        s.sites.push_back(std::move(site));
    }
    s.history = history_from(f.object("history"));
    const json& files = f.array("files");
    for (size_t i = 0; i < files.size(); ++i) {
        const fields r(files[i], name, "files[" + std::to_string(i) + "].");
        const std::string path = r.string("path");
        // Inside the folder: a state.json cannot send the check elsewhere.
        if (path.empty() || path[0] == '/' || path.find("..") != std::string::npos)
            throw r.fail("path", "\"" + path + "\" is not a path inside the checkpoint folder");
        const uint64_t crc = r.count("crc32");
        if (crc > UINT32_MAX) throw r.fail("crc32", "out of range");
        s.files.push_back({path, r.count("bytes"), static_cast<uint32_t>(crc)});
    }
    return s;
}

}  // namespace altgrad::host::run
