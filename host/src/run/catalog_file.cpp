// catalog.json: the metrics a run writes, each as run/catalog.hpp describes it.
#include "run/files.hpp"
#include "run/json_io.hpp"
#include "util/file_text.hpp"

namespace altgrad::host::run {

using namespace json_io;

namespace {

template <class E>
E enum_from(const fields& f, const char* key, const name_table<E>& names) {
    const std::string text = f.string(key);
    if (const std::optional<E> v = names.value(text)) return *v;
    throw f.fail(key, "\"" + text + "\" is not one of " + names.list());
}

json metric_json(const metric& m) {
    return {{"name", m.name},
            {"record", metric_record_names().name(m.record)},
            {"scope", metric_scope_names().name(m.scope)},
            {"type", metric_type_names().name(m.type)},
            {"unit", m.unit},
            {"source", m.source},
            {"title", m.title},
            {"series", m.series},
            {"label", m.label},
            {"summary", tensor_summary_names().name(m.summary)},
            {"summary_of", m.summary_of},
            {"log_scale", m.log_scale},
            {"required", m.required},
            {"timing", m.timing}};
}

metric metric_from(const fields& f) {
    const auto flag = [&](const char* key) {
        if (!f.at(key).is_boolean()) throw f.fail(key, "expected true or false");
        return f.at(key).get<bool>();
    };
    metric m;
    m.name = f.string("name");
    m.record = enum_from(f, "record", metric_record_names());
    m.scope = enum_from(f, "scope", metric_scope_names());
    m.type = enum_from(f, "type", metric_type_names());
    m.unit = f.string("unit");
    m.source = f.string("source");
    m.title = f.string("title");
    m.series = f.string("series");
    m.label = f.string("label");
    m.summary = enum_from(f, "summary", tensor_summary_names());
    m.summary_of = f.string("summary_of");
    m.log_scale = flag("log_scale");
    m.required = flag("required");
    m.timing = flag("timing");
    if (m.name.empty()) throw f.fail("name", "empty");
    return m;
}

}  // namespace

void write_catalog(const fs::path& run_dir, const metric_catalog& catalog) {
    json metrics = json::array();
    for (const metric& m : catalog.metrics()) metrics.push_back(metric_json(m));
    write_file_atomically(catalog_file(run_dir), json{{"metrics", metrics}}.dump(1) + "\n");
}

metric_catalog read_catalog(const fs::path& file) {
    const std::optional<std::string> text = read_text(file, kRunRecordLimit);
    if (!text) throw error(file.string() + ": cannot read");
    return parse_catalog(*text, file.string());
}

metric_catalog parse_catalog(const std::string& text, const std::string& name) {
    const json j = parse_json_text(text, name);
    const fields f(j, name);
    const json& metrics = f.array("metrics");
    metric_catalog catalog(std::vector<metric>{});
    for (size_t i = 0; i < metrics.size(); ++i) {
        const fields m(metrics[i], name, "metrics[" + std::to_string(i) + "].");
        try {
            catalog.add(metric_from(m));
        } catch (const error& e) {
            if (std::string(e.what()).rfind(name, 0) == 0) throw;
            throw m.fail("", e.what());
        }
    }
    return catalog;
}

metric_catalog catalog_of(const fs::path& run_dir, std::vector<std::string>& problems) {
    std::error_code ec;
    if (!fs::exists(catalog_file(run_dir), ec)) return metric_catalog();
    try {
        return read_catalog(catalog_file(run_dir));
    } catch (const error& e) {
        const std::string what = e.what(), prefix = catalog_file(run_dir).string() + ": ";
        problems.push_back(
            "catalog.json: " + (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what) +
            " (the host's own metrics are shown)");
        return metric_catalog();
    }
}

}  // namespace altgrad::host::run
