#include "run/json_io.hpp"
#include "util/file_text.hpp"

#include <fstream>
#include <iterator>

namespace altgrad::host::run::json_io {

namespace {

std::string untagged(const nlohmann::json::exception& e) {
    const std::string what = e.what();
    const size_t at = what.find("] ");
    return at == std::string::npos ? what : what.substr(at + 2);
}

}  // namespace

json parse_json(std::string_view text) {
    try {
        return json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw json_failure{untagged(e), e.byte >= text.size()};
    } catch (const nlohmann::json::exception& e) {
        throw json_failure{untagged(e), false};
    }
}

std::optional<std::string> read_text(const fs::path& file, size_t limit) {
    std::error_code ec;
    if (fs::is_directory(file, ec) || !fs::exists(file, ec)) return std::nullopt;
    try {
        return read_file_text(file, limit, "a run's record");
    } catch (const error& e) {
        if (std::string(e.what()).find(": more than ") != std::string::npos) throw;
        return std::nullopt;
    }
}

json parse_json_text(const std::string& text, const std::string& name) {
    try {
        return parse_json(text);
    } catch (const json_failure& e) {
        throw error(name + ": " + (e.cut_short ? "cut short (half-written?): " : "not valid JSON: ") +
                    e.message);
    }
}

json switches_json(const std::vector<format_switch>& switches) {
    json a = json::array();
    for (const format_switch& s : switches)
        a.push_back(
            {{"step", s.step}, {"tensor", s.tensor}, {"from", s.from}, {"to", s.to}, {"plugin", s.plugin}});
    return a;
}

std::vector<format_switch> switches_from(const fields& f, const char* key) {
    std::vector<format_switch> out;
    const json& a = f.array(key);
    for (size_t i = 0; i < a.size(); ++i) {
        const fields s(a[i], f.where(), f.key(key) + "[" + std::to_string(i) + "].");
        out.push_back(
            {s.integer("step"), s.string("plugin"), s.string("tensor"), s.string("from"), s.string("to")});
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

void put_metric(json& j, const metric& m, double value, bool exact_numbers) {
    json v;
    if (m.type == metric_type::count) v = static_cast<uint64_t>(value);
    else v = exact_numbers ? exact(value) : number_or_null(value);
    const size_t dot = m.name.find('.');
    if (dot == std::string::npos) j[m.name] = std::move(v);
    else j[m.name.substr(0, dot)][m.name.substr(dot + 1)] = std::move(v);
}

std::optional<double> get_metric(const fields& f, const metric& m, bool exact_numbers) {
    const size_t dot = m.name.find('.');
    if (dot != std::string::npos) {
        const std::string outer = m.name.substr(0, dot);
        if (!f.has(outer.c_str())) return std::nullopt;
        const fields inner = f.object(outer.c_str());
        metric nested = m;
        nested.name = m.name.substr(dot + 1);
        return get_metric(inner, nested, exact_numbers);
    }
    if (!f.has(m.name.c_str())) return std::nullopt;
    if (m.type == metric_type::count) return static_cast<double>(f.count(m.name.c_str()));
    return exact_numbers ? f.exact_number(m.name.c_str()) : f.number(m.name.c_str());
}

}  // namespace altgrad::host::run::json_io
