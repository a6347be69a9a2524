#include "train/history.hpp"

#include <cmath>
#include <sstream>

#include "util/error.hpp"
#include "util/json.hpp"
#include "util/json_value.hpp"

namespace altgrad::host::train {

void write_switches_and_interventions(std::ostream& o, const run_history& h) {
    o << "\"switches\": [";
    for (size_t i = 0; i < h.switches.size(); ++i)
        o << (i ? ", " : "") << "{\"step\": " << h.switches[i].step << ", \"tensor\": "
          << json::quote(h.switches[i].what.tensor) << ", \"from\": " << json::quote(h.switches[i].what.from)
          << ", \"to\": " << json::quote(h.switches[i].what.to) << ", \"plugin\": " << json::quote(h.switches[i].plugin)
          << "}";
    o << "], \"interventions\": {";
    bool first = true;
    for (const auto& [plugin, kinds] : h.interventions) {
        o << (first ? "" : ", ") << json::quote(plugin) << ": {";
        first = false;
        bool first_kind = true;
        for (const auto& [kind, n] : kinds) {
            o << (first_kind ? "" : ", ") << json::quote(kind) << ": " << n;
            first_kind = false;
        }
        o << "}";
    }
    o << "}";
}

std::string history_json(const run_history& h) {
    std::ostringstream o;
    o << "{";
    write_switches_and_interventions(o, h);
    o << ", \"events\": [";
    for (size_t i = 0; i < h.events.size(); ++i) o << (i ? ", " : "") << json::quote(h.events[i]);
    o << "], \"trend\": [";
    for (size_t i = 0; i < h.trend.size(); ++i) {
        const stability::trend_row& r = h.trend[i];
        o << (i ? ", " : "") << "[" << r.step << ", " << json::number(r.loss) << ", " << json::number(r.grad_norm) << ", "
          << json::number(r.grad_sparsity) << ", " << json::number(r.overflow_rate) << ", "
          << json::number(r.bit_stall_rate) << "]";
    }
    o << "], \"diagnostics\": [";
    for (size_t i = 0; i < h.diagnostics.size(); ++i)
        o << (i ? ", " : "") << "[" << h.diagnostics[i].step << ", " << json::quote(h.diagnostics[i].name) << ", "
          << json::number(h.diagnostics[i].value) << "]";
    o << "]}\n";
    return o.str();
}

run_history history_from_json(const std::string& text, const std::string& where) {
    const json::value v = json::parse(text);
    const auto bad = [&](const std::string& what) { return error(where + ": " + what); };
    const auto list = [&](const char* key) -> const std::vector<json::value>& {
        const json::value* a = v.find(key);
        if (a == nullptr || !a->is_array()) throw bad(std::string("'") + key + "' is missing or not an array");
        return a->items();
    };
    const auto num = [](const json::value& x) { return x.is_number() ? x.as_number() : NAN; };
    run_history h;
    for (const json::value& r : list("switches")) {
        const auto step = r.number_at("step");
        const auto plugin = r.string_at("plugin"), tensor = r.string_at("tensor"), from = r.string_at("from"),
                   to = r.string_at("to");
        if (!step || !plugin || !tensor || !from || !to) throw bad("a switch lacks step, plugin, tensor, from or to");
        h.switches.push_back({static_cast<int64_t>(*step), *plugin, {*tensor, *from, *to}});
    }
    const json::value* counts = v.find("interventions");
    if (counts == nullptr || !counts->is_object()) throw bad("'interventions' is missing or not an object");
    for (const auto& [plugin, kinds] : counts->members())
        for (const auto& [kind, n] : kinds.members()) {
            if (!n.is_number()) throw bad("the count of " + plugin + " " + kind + " is not a number");
            h.interventions[plugin][kind] = static_cast<int64_t>(n.as_number());
        }
    for (const json::value& e : list("events")) h.events.push_back(e.as_string());
    for (const json::value& r : list("trend")) {
        if (r.items().size() != 6) throw bad("a trend row does not have 6 numbers");
        const auto& x = r.items();
        h.trend.push_back({static_cast<int64_t>(num(x[0])), num(x[1]), num(x[2]), num(x[3]), num(x[4]), num(x[5])});
    }
    for (const json::value& r : list("diagnostics")) {
        if (r.items().size() != 3) throw bad("a diagnostics row does not have step, name and value");
        h.diagnostics.push_back({static_cast<int64_t>(num(r.items()[0])), r.items()[1].as_string(), num(r.items()[2])});
    }
    return h;
}

}  // namespace altgrad::host::train
