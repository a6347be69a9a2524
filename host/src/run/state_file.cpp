// checkpoints/step_N/state.json: everything of a checkpoint that is not a tensor, exactly.
#include <boost/crc.hpp>

#include "run/files.hpp"
#include "run/json_io.hpp"
#include "util/file_text.hpp"

namespace altgrad::host::run {

using namespace json_io;

namespace {

json history_json(const run_history& h) {
    json trend = json::array();
    for (const train_line& r : h.trend) {
        json row = {{"step", r.step}};
        for (const auto& [name, value] : r.values.entries()) row[name] = exact(value);
        trend.push_back(std::move(row));
    }
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

run_history history_from(const fields& f, int64_t layout) {
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
        train_line row{r.integer("step"), {}};
        for (const auto& [key, value] : trend[i].items()) {
            if (key == "step") continue;
            // Layout 1 named the bit stall of all weights bit_stall_rate.
            row.values.set(layout == 1 && key == "bit_stall_rate" ? "bit_stall" : key,
                           r.exact_number(key.c_str()));
        }
        h.trend.push_back(std::move(row));
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

// state.json's own check (layout 3): the CRC-32 of the document without its
// "state_crc32" key, written compactly by nlohmann-json (no whitespace, keys in
// the file's order, numbers in their shortest round-trip form), so a file
// re-indented by another tool still checks, and one edited does not.
constexpr const char* kOwnCrc = "state_crc32";

uint32_t document_crc(json j) {
    j.erase(kOwnCrc);
    const std::string text = j.dump();
    boost::crc_32_type crc;
    crc.process_bytes(text.data(), text.size());
    return crc.checksum();
}

// Layout 3 on: the recorded CRC-32 must be the document's. Checked after every
// other key, so damage that breaks a key is named by that key.
bool check_own_crc(const json& j, const fields& f, int64_t layout) {
    if (layout < 3) return false;
    const uint64_t recorded = f.count(kOwnCrc);
    const uint32_t actual = document_crc(j);
    if (recorded != actual)
        throw f.fail(kOwnCrc, std::to_string(recorded) + ", but the file's contents give " +
                                  std::to_string(actual) + " (state.json was damaged or edited by hand)");
    return true;
}

}  // namespace

void write_checkpoint_state(const fs::path& checkpoint, const checkpoint_state& s) {
    const auto streak = [](const streak_record& r) {
        return json{{"length", r.length},
                    {"first_step", r.first_step},
                    {"first_value", exact(r.first_value)},
                    {"last_value", exact(r.last_value)}};
    };
    json files = json::array();
    for (const file_record& f : s.files)
        files.push_back({{"path", f.path}, {"bytes", f.bytes}, {"crc32", f.crc32}});
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
    json j = {{"layout", checkpoint_state::kVersion},
              {"run_id", s.run_id},
              {"step", s.step},
              {"loop",
               {{"window_loss_sum", exact(s.detector.window_loss_sum)},
                {"window_loss_n", s.detector.window_loss_n}}},
              {"failure_detector",
               {{"nonfinite", streak(s.detector.nonfinite)},
                {"bit_stall", streak(s.detector.bit_stall)},
                {"overflow", streak(s.detector.overflow)},
                {"vanishing", streak(s.detector.vanishing)},
                {"previous_window_loss", exact(s.detector.previous_window_loss)}}},
              {"sites", sites},
              {"history", history_json(s.history)},
              {"files", files}};
    j[kOwnCrc] = document_crc(j);  // last: of everything above
    write_file_atomically(state_file(checkpoint), j.dump(1) + "\n");
}

checkpoint_state read_checkpoint_state(const fs::path& checkpoint) {
    const fs::path file = state_file(checkpoint);
    const std::optional<std::string> text = read_text(file, kRunRecordLimit);
    if (!text) throw error(file.string() + ": cannot read");
    return parse_checkpoint_state(*text, file.string());
}

checkpoint_state parse_checkpoint_state(const std::string& text, const std::string& name) {
    const json j = parse_json_text(text, name);
    const fields f(j, name);
    const int64_t layout = f.integer("layout");
    // Layout 1 differs only in the trend's rows (history_from reads both), 2 in
    // having no state_crc32 (a checkpoint of a host before it: resumable).
    if (layout != checkpoint_state::kVersion && layout != 2 && layout != 1)
        throw f.fail("layout", std::to_string(layout) + " is not this host's " +
                                   std::to_string(checkpoint_state::kVersion) +
                                   " (written by another version of altgrad-host)");
    checkpoint_state s;
    s.run_id = f.string("run_id");
    s.step = f.integer("step");
    const fields loop = f.object("loop");
    const double window_loss_sum = loop.exact_number("window_loss_sum");
    const int64_t window_loss_n = loop.integer("window_loss_n");
    const fields d = f.object("failure_detector");
    const auto streak = [&](const char* key) {
        const fields r = d.object(key);
        return streak_record{r.integer("length"), r.integer("first_step"), r.exact_number("first_value"),
                             r.exact_number("last_value")};
    };
    s.detector = {streak("nonfinite"),
                  streak("bit_stall"),
                  streak("overflow"),
                  streak("vanishing"),
                  d.exact_number("previous_window_loss"),
                  window_loss_sum,
                  window_loss_n};
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
            site.scaling.amax_history.push_back(
                r.exact_value(history[k], "amax_history[" + std::to_string(k) + "]"));
        s.sites.push_back(std::move(site));
    }
    s.history = history_from(f.object("history"), layout);
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
    s.self_checked = check_own_crc(j, f, layout);
    return s;
}

}  // namespace altgrad::host::run
