// summary.json: written once when a run ends (or by the supervisor of a crashed one).
#include "run/files.hpp"
#include "run/json_io.hpp"
#include "util/file_text.hpp"

namespace altgrad::host::run {

using namespace json_io;

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
              {"seed", s.seed}};
    // The run's metrics, every one the catalog describes: null where not finite or unknown.
    for (const metric* m : host_catalog().of_record(metric_record::summary))
        put_metric(j, *m, s.values.get(m->name));
    j["formats"] = {
        {"weight", s.formats.weight}, {"activation", s.formats.activation}, {"gradient", s.formats.gradient}};
    j["model"] = {{"parameters", s.parameters ? json(*s.parameters) : json(nullptr)}};
    j["corpus"] = {{"unigram_entropy", number_or_null(s.corpus.unigram_entropy)},
                   {"bigram", number_or_null(s.corpus.bigram)},
                   {"trigram", number_or_null(s.corpus.trigram)}};
    j["switches"] = switches_json(s.switches);
    j["interventions"] = interventions_json(s.interventions);
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
    const std::optional<std::string> text = read_text(file, kRunRecordLimit);
    if (!text) throw summary_error(file.string() + ": cannot read", false);
    return parse_summary(*text, file.string());
}

summary_record parse_summary(const std::string& text, const std::string& name) {
    json j;
    try {
        j = parse_json(text);
    } catch (const json_failure& e) {
        throw summary_error(
            name + ": " + (e.cut_short ? "half-written" : "not valid JSON") + " (" + e.message + ")",
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
        // A metric of hosts before it (cpu_seconds) is NaN: unknown.
        for (const metric* m : host_catalog().of_record(metric_record::summary)) {
            if (const std::optional<double> v = get_metric(f, *m)) s.values.set(m->name, *v);
            else if (m->required) f.at(m->name.c_str());  // "missing", naming the key
        }
        const fields formats = f.object("formats");
        s.formats = {formats.string("weight"), formats.string("activation"), formats.string("gradient")};
        if (f.has("model"))
            s.parameters = f.object("model").optional_integer("parameters");  // hosts before: none
        if (f.has("corpus")) {                                                // hosts before it wrote none
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

}  // namespace altgrad::host::run
